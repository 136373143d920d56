// A cell of your own (IndRNN, examples/indrnn.h), registered under a name and verified
// against full BPTT for every exact gradient method, with the public verifier API
// (vlrnn/verify/verify_model.h). Prints the rows `vlrnn verify` prints; exits 1 when any
// method's gradients differ from full BPTT's. Shapes: T = time, B = batch, F = input.
#include "indrnn.h"

#include <vlrnn/registry/bidirectional.h>
#include <vlrnn/verify/report.h>
#include <vlrnn/verify/verify_model.h>

#include <iostream>

int main() {
  try {
    // --- README verify begin ---
    vlrnn::add_model("indrnn", "IndRNN (examples/indrnn.h)", [](const vlrnn::ModelConfig& c) {
      return std::make_shared<IndRnn>(c.input_size, c.hidden_size);
    });
    torch::manual_seed(0);
    auto model = vlrnn::make_model({"indrnn", /*input*/ 4, /*hidden*/ 8});
    auto head = vlrnn::make_head("ce", model->output_size(), /*classes*/ 3);
    model->to(torch::kFloat64);
    head->to(torch::kFloat64);

    const int64_t T = 40, B = 4;
    vlrnn::SequenceBatch batch;
    batch.lengths = torch::tensor({40, 17, 1, 29}, torch::kLong);       // [B]
    auto padding = torch::arange(T).unsqueeze(1) >= batch.lengths;      // [T, B]
    batch.inputs = torch::randn({T, B, 4}, torch::kFloat64)             // [T, B, F]
                       .masked_fill(padding.unsqueeze(-1), NAN)         // a leak would show
                       .requires_grad_(true);                           // ask for dL/dx
    batch.targets = torch::randint(0, 3, {T, B}).masked_fill(padding, -1);  // [T, B]

    std::vector<std::string> specs = {"vlrnn:block_length=1", "vlrnn:block_length=7", "vlrnn:block_length=64"};
    for (const auto& name : vlrnn::method_names()) {  // every exact method, defaults
      // bivlrnn takes bidirectional models only (vlrnn/registry/bidirectional.h).
      if (name != "full" && vlrnn::handles_left_to_right(name) &&
          vlrnn::make_method(name)->is_exact()) {
        specs.push_back(name);
      }
    }
    vlrnn::verify::VerifyModelOptions options;
    options.h0 = vlrnn::State{torch::randn({B, 8}, torch::kFloat64).requires_grad_(true)};
    options.label = "indrnn";
    const auto rows = vlrnn::verify::verify_model(*model, *head, batch, specs, options);
    vlrnn::verify::print_table(std::cout, rows);
    std::cout << "custom_cell: " << vlrnn::verify::summary_line(rows) << "\n";
    // --- README verify end ---
    for (const auto& row : rows) {
      if (row.exact && !row.passed) return 1;
    }
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << "custom_cell: error: " << e.what_without_backtrace() << "\n";
    return 2;
  }
}
