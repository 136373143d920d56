#include "vlrnn/verify/case.h"

#include "vlrnn/registry/heads.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vlrnn::verify {

std::string VerifyCase::name() const {
  std::string model_name = model == "gru_lstm" ? model : fmt::format("{}x{}", model, num_layers);
  if (dropout > 0) model_name += fmt::format("+drop{}", dropout);
  std::string lengths_mode;
  if (!lengths.empty()) {
    lengths_mode = *std::max_element(lengths.begin(), lengths.end()) == time_steps ? "/var"
                                                                                   : "/tail";
  }
  return fmt::format("{}/{}/{}/{}/h0={}{}/T={}{}", model_name, head, reduction,
                     dtype == torch::kFloat64 ? "f64" : "f32", h0_with_grad ? "grad" : "none",
                     inputs_with_grad ? "" : "/x=none", time_steps, lengths_mode);
}

namespace {

// NOTE [ Diagnosing a failure ]: the most common way a user's model breaks block methods is
// drawing random numbers (dropout) per call rather than per step, so that the masks depend
// on where the sequence is cut. The same shows when a model's output depends on the cut for
// any other reason (state it keeps between calls, a step that looks ahead). Check it
// directly: from one generator state, one forward over all T steps and two forwards cut at
// T / 2 must give the same outputs and final state.
std::string cut_dependence(const Workload& workload, uint64_t seed) {
  const int64_t T = workload.batch.time_steps();
  if (T < 2) return "";
  torch::NoGradGuard no_grad;
  const auto device = workload.batch.inputs.device();
  const RngState before = RngState::capture(device);
  torch::manual_seed(seed);
  auto [z_whole, h_whole] = run_model(workload, workload.batch.inputs, 0, T, workload.h0);
  torch::manual_seed(seed);
  const int64_t cut = T / 2;
  auto [z_first, h_cut] = run_model(workload, workload.batch.inputs.narrow(0, 0, cut), 0, cut,
                                    workload.h0);
  auto [z_second, h_cut_exit] = run_model(workload, workload.batch.inputs.narrow(0, cut, T - cut),
                                          cut, T - cut, h_cut);
  before.restore();
  const auto z_cut = torch::cat({z_first, z_second});
  const double scale = std::max(z_whole.abs().max().item<double>(), 1e-300);
  double worst = (z_cut - z_whole).abs().max().item<double>() / scale;
  for (size_t i = 0; i < h_whole.size(); ++i) {
    const double s = std::max(h_whole[i].abs().max().item<double>(), 1e-300);
    worst = std::max(worst, (h_cut_exit[i] - h_whole[i]).abs().max().item<double>() / s);
  }
  if (!(worst > tolerance_for(workload.batch.inputs.scalar_type()))) return "";
  return fmt::format(
      "the model's outputs depend on where the sequence is cut into blocks: from the same "
      "generator state, one forward over steps [0, {}) and two forwards over [0, {}) and "
      "[{}, {}) differ by {:.2e} (relative). If it draws random numbers (dropout), its masks "
      "must be drawn one step at a time (the RecurrentModule contract); block methods cannot "
      "be exact otherwise",
      T, cut, cut, T, worst);
}

// A batch of random data for `spec`: inputs [T, B, F], targets, lengths padded with nan.
SequenceBatch make_batch(const VerifyCase& spec, const OutputModule& head) {
  const auto options = torch::TensorOptions().dtype(spec.dtype);
  SequenceBatch batch;
  batch.inputs = torch::randn({spec.time_steps, spec.batch, spec.input_size}, options);
  batch.targets = random_targets(head, spec.time_steps, spec.batch, options);
  if (!spec.lengths.empty()) {
    TORCH_CHECK(int64_t(spec.lengths.size()) == spec.batch, "verify case lengths: expected ",
                spec.batch, " lengths (one per sequence), got ", spec.lengths.size());
    batch.lengths = torch::tensor(spec.lengths, torch::kLong);
    // Padding is nan (-1 for class targets): any leak into a valid step fails the case.
    auto padded = torch::arange(spec.time_steps).unsqueeze(1) >= batch.lengths.unsqueeze(0);
    batch.inputs.masked_fill_(padded.unsqueeze(-1), NAN);
    if (batch.targets.is_floating_point()) {
      batch.targets.masked_fill_(padded.unsqueeze(-1), NAN);
    } else {
      batch.targets.masked_fill_(padded, -1);
    }
  }
  if (spec.inputs_with_grad) batch.inputs.requires_grad_(true);
  return batch;
}

State make_h0(const VerifyCase& spec, const RecurrentModule& model) {
  if (!spec.h0_with_grad) return {};
  std::vector<torch::Tensor> tensors;
  for (const auto& s : model.state_spec()) {
    tensors.push_back(torch::randn(s.shape_for_batch(spec.batch), torch::dtype(spec.dtype))
                          .requires_grad_(true));
  }
  return State(std::move(tensors));
}

}  // namespace

VerifyOutcome verify_against_full(GradientMethod& method, const Workload& workload,
                                  uint64_t seed) {
  VerifyOutcome outcome;
  outcome.tolerance = tolerance_for(workload.batch.inputs.scalar_type());
  outcome.exact = method.is_exact();
  auto reference_method = make_method("full");
  // Both runs start from the same generator state, so a model that draws random numbers
  // (dropout) sees the same draws in every method.
  torch::manual_seed(seed);
  const auto reference = run_and_snapshot(*reference_method, workload);
  torch::manual_seed(seed);
  const auto got = run_and_snapshot(method, workload);
  outcome.diff = compare(got, reference);
  outcome.passed = !outcome.exact || outcome.diff.max_rel <= outcome.tolerance;
  if (!outcome.passed) outcome.diagnosis = cut_dependence(validated(workload), seed);
  return outcome;
}

VerifyOutcome run_case(const VerifyCase& spec, const CaseInjection& injection) {
  VerifyOutcome outcome;
  outcome.tolerance = tolerance_for(spec.dtype);
  try {
    torch::manual_seed(spec.seed);
    auto model = make_model(
        {spec.model, spec.input_size, spec.hidden_size, spec.num_layers, spec.dropout});
    if (injection.wrap_model) model = injection.wrap_model(model);
    model->to(spec.dtype);
    auto head = make_head(spec.head, model->output_size(), spec.head == "ce" ? 3 : 2);
    head->to(spec.dtype);
    const SequenceBatch batch = make_batch(spec, *head);
    const State h0 = make_h0(spec, *model);
    const Workload workload{*model, *head, batch, h0, reduction_from_string(spec.reduction)};

    auto method = injection.make_method ? injection.make_method(spec)
                                        : make_method_from_spec(spec.method);
    outcome = verify_against_full(*method, workload, spec.seed + 1);
  } catch (const std::exception& e) {
    outcome.error = measure::short_message(e);
    outcome.passed = false;
  }
  outcome.spec = spec;
  return outcome;
}

}  // namespace vlrnn::verify
