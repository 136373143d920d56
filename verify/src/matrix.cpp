#include "vlrnn/verify/matrix.h"

#include "vlrnn/methods/block.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>


namespace vlrnn::verify {

namespace {

// The option values each method is verified with; a method not listed here is verified
// with its defaults only.
std::vector<std::string> method_variants(const std::string& method, int64_t time_steps) {
  if (method == "vlrnn") {
    std::vector<std::string> specs;
    // K = 1, 2, 7 (divides T = 28), 5 (does not), T, and beyond T.
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(7), int64_t(5), time_steps, time_steps + 12}) {
      specs.push_back(fmt::format("vlrnn:block={}", k));
    }
    return specs;
  }
  if (method == "checkpoint") {
    const auto root = sqrt_steps(time_steps);
    return {"checkpoint:segments=1", "checkpoint:segments=2",
            fmt::format("checkpoint:segments={}", root),
            fmt::format("checkpoint:segments={}", time_steps),
            fmt::format("checkpoint:segments={},head_inside=0", root)};
  }
  // Schedule-based methods (vlrnn/schedule/): one variant each keeps verify quick; the
  // schedule tests (tests/schedule) cover more (revolve with one slot, other budgets).
  if (method == "revolve") return {"revolve:slots=3"};
  // percent is raised to the minimum feasible budget when below it: 1% nests recomputation;
  // at 90% the planner keeps tapes (NOTE [ Kept tapes ]) on the single-layer LSTM (on the
  // measured costs of this machine: tests/schedule/test_kept_tapes.cpp forces the case).
  if (method == "planner") return {"planner:percent=1", "planner:percent=90"};
  if (method == "tbptt") {
    return {"tbptt:k=1", "tbptt:k=7", fmt::format("tbptt:k={}", time_steps), "tbptt:k1=4,k2=10"};
  }
  return {method};
}

// The reduced grid the GRU variants run on: of `method`'s variants, those whose last option
// is 1, 7 or T (K = 1, 7, T for vlrnn); all of them when none has such an option.
std::vector<std::string> reduced_method_variants(const std::string& method, int64_t time_steps) {
  const auto all = method_variants(method, time_steps);
  std::vector<std::string> kept;
  for (const auto& spec : all) {
    const auto eq = spec.rfind('=');
    if (eq == std::string::npos) continue;
    const std::string value = spec.substr(eq + 1);
    for (int64_t k : {int64_t(1), int64_t(7), time_steps}) {
      if (value == std::to_string(k)) {
        kept.push_back(spec);
        break;
      }
    }
  }
  return kept.empty() ? all : kept;
}

struct ModelShape {
  std::string kind;
  int64_t layers;
  std::string head;
  double dropout;
};

// Every case of `shapes` × `specs` × {sum, mean} × {float64, float32} × {h0 with grad, h0
// absent} × the length sets, from `base`.
void add_cases(std::vector<VerifyCase>& cases, const VerifyCase& base,
               const std::vector<ModelShape>& shapes, const std::vector<std::string>& specs) {
  const int64_t T = base.time_steps;
  // Every sequence T long; mixed lengths, unsorted, one of length 1, one shorter than most
  // blocks, one of length T; and the same with no sequence reaching T (a batch padded to a
  // bucket length), so that whole blocks at the end hold only padding.
  const std::vector<std::vector<int64_t>> length_sets = {{}, {17, T, 1, 4}, {17, 9, 1, 4}};
  for (const auto& spec : specs) {
    for (const auto& m : shapes) {
      for (const char* reduction : {"sum", "mean"}) {
        for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
          for (bool h0_with_grad : {true, false}) {
            for (const auto& lengths : length_sets) {
              VerifyCase c = base;
              c.lengths = lengths;
              if (!lengths.empty()) c.batch = int64_t(lengths.size());
              // The padded tail runs with and without dL/dx asked for (paired with the h0
              // mode, so the matrix does not double): a block no sequence reaches gets no
              // input gradient at all.
              if (&lengths == &length_sets.back()) c.inputs_with_grad = h0_with_grad;
              c.model = m.kind;
              c.num_layers = m.layers;
              c.dropout = m.dropout;
              c.head = m.head;
              c.method = spec;
              c.reduction = reduction;
              c.dtype = dtype;
              c.h0_with_grad = h0_with_grad;
              cases.push_back(c);
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::vector<VerifyCase> default_matrix() {
  const std::vector<ModelShape> models = {
      {"rnn", 1, "ce", 0.0},      {"gru", 1, "mse", 0.0},      {"lstm", 1, "ce", 0.0},
      {"lstm", 3, "mse", 0.0},    {"gru_lstm", 1, "ce", 0.0},  {"lstm", 3, "ce", 0.3},
      {"gru_lstm", 1, "mse", 0.25}};
  // The cells with a hand-written block backward (GRU variants, vlrnn/cells/gru_variants.h;
  // lstm_block, vlrnn/cells/block_lstm.h), also stacked with dropout, on the reduced grid
  // of reduced_method_variants().
  const std::vector<ModelShape> gru_variants = {
      {"gru_v1", 1, "ce", 0.0}, {"gru_v2", 1, "mse", 0.0}, {"gru_v3", 1, "ce", 0.0},
      {"gru_v4", 1, "mse", 0.0}, {"gru_v4", 2, "ce", 0.25}, {"lstm_block", 1, "ce", 0.0},
      {"lstm_block", 3, "mse", 0.3}};
  std::vector<VerifyCase> cases;
  const VerifyCase base;
  for (const auto& method : method_names()) {
    if (method == "full") continue;
    add_cases(cases, base, models, method_variants(method, base.time_steps));
    add_cases(cases, base, gru_variants, reduced_method_variants(method, base.time_steps));
  }
  return cases;
}

std::vector<VerifyCase> model_matrix(const std::string& kind, const std::string& head) {
  VerifyCase base;
  base.model = kind;
  base.num_layers = 1;
  base.head = head;
  // A head that fixes its own Z (a head file) gives H; a built-in reads whatever it is given.
  const int64_t z = make_head(head, base.hidden_size, 3)->input_size();
  const bool fixed_z = make_head(head, base.hidden_size + 1, 3)->input_size() == z;
  if (fixed_z) base.hidden_size = z;
  // The model's own F (and H): a TorchScript file fixes them whatever the config asks.
  const auto model = make_model({kind, base.input_size, base.hidden_size, 1, 0.0});
  base.input_size = model->input_size();
  TORCH_CHECK(!fixed_z || model->output_size() == z, "head \"", head, "\": expected it to "
              "read the model's H = ", model->output_size(), " features per step (model \"",
              kind, "\"), found input_size Z = ", z);
  std::vector<VerifyCase> cases;
  for (const auto& method : method_names()) {
    if (method == "full") continue;
    add_cases(cases, base, {{kind, 1, head, 0.0}},
              reduced_method_variants(method, base.time_steps));
  }
  return cases;
}

}  // namespace vlrnn::verify
