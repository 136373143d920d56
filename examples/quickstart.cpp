// docs/cpp.md's "Using VLRNN from C++" snippet, verbatim between the markers.
#include <vlrnn/vlrnn.h>

#include <iostream>

int main() {
  // --- README snippet begin ---
  auto model = vlrnn::make_model({"lstm", /*input*/ 16, /*hidden*/ 64, /*layers*/ 2});
  auto head = vlrnn::make_head("ce", model->output_size(), /*classes*/ 10);

  vlrnn::SequenceBatch batch;
  batch.inputs = torch::randn({4096, 8, 16});              // [T, B, F]
  batch.targets = torch::randint(0, 10, {4096, 8});        // [T, B]

  auto method = vlrnn::make_method("vlrnn", {{"block_length", 128}});  // or "full", ...
  auto result = method->compute({*model, *head, batch});
  std::cout << "loss " << result.loss.item<double>() << ", dL/dW_ih norm "
            << model->parameters()[0].grad().norm().item<double>() << "\n";
  // --- README snippet end ---
  return 0;
}
