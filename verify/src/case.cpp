#include "vlrnn/verify/case.h"

#include "vlrnn/verify/compare.h"
#include "vlrnn/verify/cut_dependence.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/core/exact_float32.h"

#include "vlrnn/registry/heads.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

namespace vlrnn::verify {

namespace {

// The case name's dtype: f64, f32, bf16, f16.
std::string short_dtype_name(torch::ScalarType dtype) {
  const std::string name = dtype_name(dtype);  // float64, ..., bfloat16
  return name.rfind("float", 0) == 0 ? "f" + name.substr(5) : name == "bfloat16" ? "bf16" : name;
}

}  // namespace

std::string VerifyCase::name() const {
  std::string model_name = !model_label.empty() ? model_label
                           : model == "gru_lstm"  ? model
                                                  : fmt::format("{}x{}", model, num_layers);
  if (dropout > 0) model_name += fmt::format("+drop{}", dropout);
  std::string lengths_mode;
  if (!lengths.empty()) {
    lengths_mode = *std::max_element(lengths.begin(), lengths.end()) == time_steps ? "/var"
                                                                                   : "/tail";
  }
  return fmt::format("{}/{}/{}/{}/h0={}{}/T={}{}{}{}", model_name, head, reduction,
                     short_dtype_name(dtype), h0_with_grad ? "grad" : "none",
                     inputs_with_grad ? "" : "/x=none", time_steps, lengths_mode,
                     segment_starts.empty() ? "" : "/resets",
                     device.is_cpu() ? "" : "/" + device.str());
}

namespace {

// NOTE [ Diagnosing a failure ]: the most common way a user's model breaks block methods is
// drawing random numbers (dropout) per call rather than per step, so that the masks depend
// on where the sequence is cut. The same shows when a model's output depends on the cut for
// any other reason (state it keeps between calls, a step that looks ahead). Check it
// directly: from one generator state, one forward over all T steps and two forwards cut at
// T / 2 must give the same outputs and final state (cut_dependence.h).
std::string cut_dependence(const Workload& workload, uint64_t seed) {
  return cut_dependence_diagnosis(measure_cut_dependence(workload, seed),
                                  workload.batch.time_steps(),
                                  tolerance_for(workload.batch.inputs.scalar_type()));
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
  if (!spec.segment_starts.empty()) {
    TORCH_CHECK(int64_t(spec.segment_starts.size()) == spec.batch, "verify case segment_starts: "
                "expected ", spec.batch, " lists (one per sequence), got ",
                spec.segment_starts.size());
    batch.resets = resets_from_segment_starts(spec.segment_starts, spec.time_steps);
  }
  batch.inputs = batch.inputs.to(spec.device);
  batch.targets = batch.targets.to(spec.device);
  if (batch.has_resets()) batch.resets = batch.resets.to(spec.device);
  if (spec.inputs_with_grad) batch.inputs.requires_grad_(true);
  return batch;
}

// A random state for `spec`'s batch: h0 (requiring grad) or the seed of the final state.
State random_state(const VerifyCase& spec, const RecurrentModule& model, bool requires_grad) {
  std::vector<torch::Tensor> tensors;
  for (const auto& s : model.state_spec()) {
    tensors.push_back(torch::randn(s.shape_for_batch(spec.batch), torch::dtype(spec.dtype))
                          .to(spec.device)
                          .requires_grad_(requires_grad));
  }
  return State(std::move(tensors));
}

// Full BPTT on `workload` from generator state `seed`: what every method is compared with.
// Each method's run starts from the same generator state, so a model that draws random
// numbers (dropout) sees the same draws in every method.
GradientSnapshot reference_snapshot(const Workload& workload, uint64_t seed) {
  const ExactFloat32 exact_float32;  // NOTE [ Float32 without TF32 ]
  auto reference_method = make_method("full");
  torch::manual_seed(seed);
  return run_and_snapshot(*reference_method, workload);
}

VerifyOutcome compare_with_reference(GradientMethod& method, const Workload& workload,
                                     uint64_t seed, const GradientSnapshot& reference) {
  const ExactFloat32 exact_float32;
  VerifyOutcome outcome;
  outcome.tolerance = tolerance_for(workload.batch.inputs.scalar_type());
  outcome.exact = method.is_exact();
  torch::manual_seed(seed);
  const auto got = run_and_snapshot(method, workload);
  outcome.diff = compare(got, reference);
  outcome.passed = !outcome.exact || outcome.diff.max_rel <= outcome.tolerance;
  // A bidirectional model runs on the whole sequence only: there is no cut to compare.
  if (!outcome.passed && !as_bidirectional(workload.model)) {
    outcome.diagnosis = cut_dependence(validated(workload), seed);
  }
  return outcome;
}

// NOTE [ One reference per case ]: the matrix verifies some 30 method specs on the same few
// hundred cases, and full BPTT on a case is one computation whatever it is compared with:
// the case's seed fixes the weights, data, h0 and generator state. Running it again for
// every spec was about a third of the matrix's time. So run_case keeps each case's
// reference, keyed by every field of the case but its method (reference_key), and computes
// it when the key is new. A case whose model is wrapped (the verifier's own mutation tests)
// is computed afresh: the wrapper is not part of the key. The store is bounded in bytes
// (references of long sequences are large), and emptied when full.
std::string reference_key(const VerifyCase& c) {
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|lengths", c.model,
                                c.model_label, c.num_layers, c.dropout, c.head, c.reduction,
                                c10::toString(c.dtype), c.h0_with_grad, c.inputs_with_grad,
                                c.time_steps, c.batch, c.input_size, c.hidden_size, c.seed,
                                c.device.str());
  for (int64_t length : c.lengths) key += fmt::format(" {}", length);
  key += "|resets";
  for (const auto& starts : c.segment_starts) {
    key += " /";
    for (int64_t start : starts) key += fmt::format(" {}", start);
  }
  return key;
}

class ReferenceStore {
 public:
  static constexpr int64_t kMaxBytes = int64_t(256) << 20;

  template <typename Compute>
  std::shared_ptr<const GradientSnapshot> get(const std::string& key, Compute compute) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto found = snapshots_.find(key);
      if (found != snapshots_.end()) return found->second;
    }
    auto snapshot = std::make_shared<const GradientSnapshot>(compute());
    int64_t bytes = 0;
    for (const auto& named : snapshot->tensors) bytes += int64_t(named.second.nbytes());
    const std::lock_guard<std::mutex> lock(mutex_);
    if (bytes_ + bytes > kMaxBytes) {
      snapshots_.clear();
      bytes_ = 0;
    }
    if (snapshots_.emplace(key, snapshot).second) bytes_ += bytes;
    return snapshot;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const GradientSnapshot>> snapshots_;
  int64_t bytes_ = 0;
};

ReferenceStore& reference_store() {
  static ReferenceStore store;
  return store;
}

}  // namespace

VerifyOutcome verify_against_full(GradientMethod& method, const Workload& workload,
                                  uint64_t seed) {
  return compare_with_reference(method, workload, seed, reference_snapshot(workload, seed));
}

namespace {

// What a case runs on, built from its seed: model, head, data and h0.
struct BuiltCase {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;
  State h0, final_state_grad;
  Workload workload(const VerifyCase& spec) const {
    Workload w{*model, *head, batch, h0, reduction_from_string(spec.reduction)};
    w.final_state_grad = final_state_grad;
    return w;
  }
};

BuiltCase build_case(const VerifyCase& spec, const CaseInjection& injection) {
  BuiltCase built;
  torch::manual_seed(spec.seed);
  built.model = make_model(
      {spec.model, spec.input_size, spec.hidden_size, spec.num_layers, spec.dropout});
  if (injection.wrap_model) built.model = injection.wrap_model(built.model);
  built.model->to(spec.device, spec.dtype);
  built.head = make_head(spec.head, built.model->output_size(), spec.head == "ce" ? 3 : 2);
  built.head->to(spec.device, spec.dtype);
  built.batch = make_batch(spec, *built.head);
  if (spec.h0_with_grad) {
    // A call inside a stream (NOTE [ Gradients across calls ]): h0 with a gradient, and a
    // later call's dL/d(final state) seeding this one.
    built.h0 = random_state(spec, *built.model, true);
    built.final_state_grad = random_state(spec, *built.model, false);
  }
  return built;
}

}  // namespace

VerifyOutcome run_case(const VerifyCase& spec, const CaseInjection& injection) {
  VerifyOutcome outcome;
  outcome.tolerance = tolerance_for(spec.dtype);
  try {
    const BuiltCase built = build_case(spec, injection);
    auto method = injection.make_method ? injection.make_method(spec)
                                        : make_method_from_spec(spec.method);
    const Workload workload = built.workload(spec);
    const uint64_t seed = spec.seed + 1;
    if (injection.wrap_model) {
      outcome = verify_against_full(*method, workload, seed);
    } else {  // NOTE [ One reference per case ]
      const auto reference = reference_store().get(
          reference_key(spec), [&] { return reference_snapshot(workload, seed); });
      outcome = compare_with_reference(*method, workload, seed, *reference);
    }
  } catch (const std::exception& e) {
    outcome.error = measure::short_message(e);
    outcome.passed = false;
  }
  outcome.spec = spec;
  return outcome;
}

CutDependence case_cut_dependence(const VerifyCase& spec, const CaseInjection& injection) {
  const BuiltCase built = build_case(spec, injection);
  return measure_cut_dependence(validated(built.workload(spec)), spec.seed + 1);
}

}  // namespace vlrnn::verify
