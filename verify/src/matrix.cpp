#include "vlrnn/verify/matrix.h"

#include "vlrnn/core/heads.h"
#include "vlrnn/core/models.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/methods/registry.h"

#include <fmt/format.h>

#include <cmath>

namespace vlrnn::verify {

std::string VerifyCase::name() const {
  std::string model_name = model == "gru_lstm" ? model : fmt::format("{}x{}", model, num_layers);
  if (dropout > 0) model_name += fmt::format("+drop{}", dropout);
  return fmt::format("{}/{}/{}/{}/h0={}/T={}{}", model_name, head, reduction,
                     dtype == torch::kFloat64 ? "f64" : "f32", h0_with_grad ? "grad" : "none",
                     time_steps, variable_lengths ? "/var" : "");
}

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
  if (method == "uniform") return {"uniform:block=5"};
  if (method == "revolve") return {"revolve:slots=3"};
  // percent is raised to the minimum feasible budget when below it: 1% nests recomputation.
  if (method == "planner") return {"planner:percent=1"};
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

}  // namespace

std::vector<VerifyCase> default_matrix() {
  struct ModelShape {
    std::string kind;
    int64_t layers;
    std::string head;
    double dropout;
  };
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
  VerifyCase base;
  auto add_cases = [&](const std::vector<ModelShape>& shapes, const std::vector<std::string>& specs) {
    for (const auto& spec : specs) {
      for (const auto& m : shapes) {
        for (const char* reduction : {"sum", "mean"}) {
          for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
            for (bool h0_with_grad : {true, false}) {
             for (bool variable_lengths : {false, true}) {
              VerifyCase c = base;
              c.variable_lengths = variable_lengths;
              if (variable_lengths) c.batch = 4;
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
  };
  for (const auto& method : method_names()) {
    if (method == "full") continue;
    add_cases(models, method_variants(method, base.time_steps));
    add_cases(gru_variants, reduced_method_variants(method, base.time_steps));
  }
  return cases;
}

VerifyOutcome run_case(const VerifyCase& spec) {
  VerifyOutcome outcome;
  outcome.spec = spec;
  outcome.tolerance = tolerance_for(spec.dtype);
  try {
    torch::manual_seed(spec.seed);
    ModelConfig config;
    config.kind = spec.model;
    config.input_size = spec.input_size;
    config.hidden_size = spec.hidden_size;
    config.num_layers = spec.num_layers;
    config.dropout = spec.dropout;
    auto model = make_model(config);
    model->to(spec.dtype);
    auto head = make_head(spec.head, model->output_size(), spec.head == "ce" ? 3 : 2);
    head->to(spec.dtype);
    const auto options = torch::TensorOptions().dtype(spec.dtype);

    SequenceBatch batch;
    batch.inputs = torch::randn({spec.time_steps, spec.batch, spec.input_size}, options)
                       .requires_grad_(true);  // [T, B, F]
    batch.targets = random_targets(*head, spec.time_steps, spec.batch, options);
    if (spec.variable_lengths) {
      batch.lengths = torch::tensor({std::min<int64_t>(17, spec.time_steps), spec.time_steps,
                                     int64_t(1), std::min<int64_t>(4, spec.time_steps)});
      // Padding is nan (-1 for class targets): any leak into a valid step fails the case.
      auto padded = torch::arange(spec.time_steps).unsqueeze(1) >= batch.lengths.unsqueeze(0);
      torch::NoGradGuard no_grad;
      batch.inputs.masked_fill_(padded.unsqueeze(-1), NAN);
      if (batch.targets.is_floating_point()) {
        batch.targets.masked_fill_(padded.unsqueeze(-1), NAN);
      } else {
        batch.targets.masked_fill_(padded, -1);
      }
    }
    State h0;
    if (spec.h0_with_grad) {
      std::vector<torch::Tensor> tensors;
      for (const auto& s : model->state_spec()) {
        tensors.push_back(torch::randn(s.shape_for_batch(spec.batch), options).requires_grad_(true));
      }
      h0 = State(std::move(tensors));
    }
    const Workload workload{*model, *head, batch, h0, reduction_from_string(spec.reduction)};

    auto reference_method = make_method("full");
    auto method = make_method_from_spec(spec.method);
    outcome.exact = method->is_exact();
    // Both runs start from the same generator state, so a model that draws random numbers
    // (dropout) sees the same draws in every method.
    torch::manual_seed(spec.seed + 1);
    const auto reference = run_and_snapshot(*reference_method, workload);
    torch::manual_seed(spec.seed + 1);
    const auto got = run_and_snapshot(*method, workload);
    outcome.diff = compare(got, reference);
    outcome.passed = !outcome.exact || outcome.diff.max_rel <= outcome.tolerance;
  } catch (const std::exception& e) {
    outcome.error = e.what();
    outcome.passed = false;
  }
  return outcome;
}

}  // namespace vlrnn::verify
