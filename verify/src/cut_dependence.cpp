#include "vlrnn/verify/cut_dependence.h"

#include "vlrnn/core/exact_float32.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_map>

namespace vlrnn::verify {

namespace {

// The observer of NOTE [ Cut dependence, whatever the generator's layout ]. RecordFunction
// callbacks are plain function pointers: their state is thread-local, as the callback is.
struct ShiftState {
  torch::Device device = torch::kCPU;
  int64_t random_ops = 0;
  std::unordered_map<std::string, bool> takes_generator;  // by operator name, cached
};
thread_local ShiftState* shift_state = nullptr;

bool takes_generator(const at::RecordFunction& fn) {
  auto& cache = shift_state->takes_generator;
  const std::string name = fn.name();
  if (const auto it = cache.find(name); it != cache.end()) return it->second;
  bool found = false;
  if (const auto schema = fn.operator_schema()) {
    for (const auto& argument : schema->arguments()) {
      found = found || argument.type()->str().find("Generator") != std::string::npos;
    }
  }
  cache.emplace(name, found);
  return found;
}

void after_op(const at::RecordFunction& fn, at::ObserverContext*) {
  if (shift_state == nullptr || !takes_generator(fn)) return;
  ++shift_state->random_ops;
  // One extra draw from the generator of the device the model runs on, itself unobserved.
  at::DisableRecordFunctionGuard unobserved;
  torch::NoGradGuard no_grad;
  torch::empty({1}, torch::TensorOptions().dtype(torch::kFloat).device(shift_state->device))
      .uniform_();
}

// While alive, every random operation on this thread is followed by one extra draw.
class ShiftEachRandomOp {
 public:
  explicit ShiftEachRandomOp(torch::Device device) {
    state_.device = device;
    shift_state = &state_;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(nullptr, &after_op).scopes({at::RecordScope::FUNCTION}));
  }
  ~ShiftEachRandomOp() {
    at::removeCallback(handle_);
    shift_state = nullptr;
  }
  ShiftEachRandomOp(const ShiftEachRandomOp&) = delete;
  ShiftEachRandomOp& operator=(const ShiftEachRandomOp&) = delete;
  int64_t random_ops() const { return state_.random_ops; }

 private:
  ShiftState state_;
  at::CallbackHandle handle_ = 0;
};

// max |got - ref| / max |ref| (a zero reference: the absolute difference).
double relative(const torch::Tensor& got, const torch::Tensor& ref) {
  const double scale = std::max(ref.abs().max().item<double>(), 1e-300);
  return (got - ref).abs().max().item<double>() / scale;
}

// From generator seed `seed`: forward over [0, T) and forwards over [0, cut) and [cut, T);
// the largest relative difference of z [T, B, H] and of each final-state tensor.
double cut_vs_whole(const Workload& workload, uint64_t seed, int64_t cut) {
  const int64_t T = workload.batch.time_steps();
  const auto& x = workload.batch.inputs;  // [T, B, F]
  torch::manual_seed(seed);
  auto [z_whole, h_whole] = run_model(workload, x, 0, T, workload.h0);
  torch::manual_seed(seed);
  auto [z_first, h_cut] = run_model(workload, x.narrow(0, 0, cut), 0, cut, workload.h0);
  auto [z_second, h_exit] = run_model(workload, x.narrow(0, cut, T - cut), cut, T - cut, h_cut);
  double worst = relative(torch::cat({z_first, z_second}), z_whole);
  for (size_t i = 0; i < h_whole.size(); ++i) worst = std::max(worst, relative(h_exit[i], h_whole[i]));
  return worst;
}

}  // namespace

CutDependence measure_cut_dependence(const Workload& given, uint64_t seed) {
  // As a gradient method sees it: h0 absent means the model's initial state (a model that
  // is handed no state, as a Python module is, need not know what that is), padding zeroed.
  const Workload workload = validated(given);
  const ExactFloat32 exact_float32;  // NOTE [ Float32 without TF32 ]
  CutDependence result;
  const int64_t T = workload.batch.time_steps();
  if (T < 2) return result;
  result.cut = T / 2;
  torch::NoGradGuard no_grad;
  const auto device = workload.batch.inputs.device();
  const RngState before = RngState::capture(device);
  try {
    result.here = cut_vs_whole(workload, seed, result.cut);
    ShiftEachRandomOp shift(device);
    result.any_layout = cut_vs_whole(workload, seed, result.cut);
    result.random_ops = shift.random_ops();
  } catch (...) {
    before.restore();
    throw;
  }
  before.restore();
  return result;
}

std::string cut_dependence_diagnosis(const CutDependence& cut, int64_t time_steps,
                                     double tolerance) {
  if (cut.cut == 0 || !(cut.here > tolerance)) return "";
  return fmt::format(
      "the model's outputs depend on where the sequence is cut into blocks: from the same "
      "generator state, one forward over steps [0, {}) and two forwards over [0, {}) and "
      "[{}, {}) differ by {:.2e} (relative). If it draws random numbers (dropout), its masks "
      "must be drawn one step at a time (the RecurrentModule contract); block methods cannot "
      "be exact otherwise",
      time_steps, cut.cut, cut.cut, time_steps, cut.here);
}

std::string per_call_draws_warning(const CutDependence& cut, double tolerance) {
  if (cut.cut == 0 || cut.here > tolerance || !(cut.any_layout > tolerance)) return "";
  return fmt::format(
      "the model draws its random numbers (dropout masks) once per forward() call, not one "
      "step at a time: with every random operation followed by one extra draw from the "
      "generator, a forward cut at step {} differs from the uncut one by {:.2e} (relative). "
      "It passes here only because this LibTorch's CPU generator lays one [T, B, H] draw out "
      "exactly as T draws of [B, H]; on a GPU (or a CPU LibTorch with MKL) the masks depend "
      "on where the sequence is cut and no block method is exact for it, so this pass does "
      "not carry over. Draw one mask per step (the RecurrentModule contract)",
      cut.cut, cut.any_layout);
}

}  // namespace vlrnn::verify
