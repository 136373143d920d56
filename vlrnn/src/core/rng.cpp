#include "vlrnn/core/rng.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <mutex>

namespace vlrnn {
namespace {

// A Generator is a shared handle: a copy refers to the same generator, which lets us call
// its non-const mutex() and set_state() on the default generators we are given as const.
torch::Tensor state_of(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_state_of(at::Generator generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

const at::Generator& cuda_generator(c10::DeviceIndex index) {
  return at::detail::getCUDAHooks().getDefaultCUDAGenerator(index);
}

// NOTE [ Shared RNG snapshots ]: a method captures the generators at every block entry,
// but a model that draws no random numbers never moves them. Reusing the previous snapshot
// when the state is unchanged keeps one 5 KB tensor for such models instead of one per
// block, so the stored states alone set VLRNN's memory growth in T.
torch::Tensor share_if_unchanged(torch::Tensor state, torch::Tensor& last) {
  if (last.defined() && last.sizes() == state.sizes() && torch::equal(last, state)) return last;
  last = state;
  return state;
}

}  // namespace

RngState RngState::capture(const torch::Device& device) {
  RngState snapshot;
  static thread_local torch::Tensor last_cpu_state, last_cuda_state;
  snapshot.cpu_state_ =
      share_if_unchanged(state_of(at::detail::getDefaultCPUGenerator()), last_cpu_state);
  if (device.is_cuda()) {
    snapshot.cuda_index_ = device.has_index() ? device.index() : c10::DeviceIndex(0);
    snapshot.cuda_state_ =
        share_if_unchanged(state_of(cuda_generator(snapshot.cuda_index_)), last_cuda_state);
  }
  return snapshot;
}

void RngState::restore() const {
  TORCH_CHECK(captured(), "RngState::restore: nothing was captured");
  set_state_of(at::detail::getDefaultCPUGenerator(), cpu_state_);
  if (cuda_state_.defined()) set_state_of(cuda_generator(cuda_index_), cuda_state_);
}

}  // namespace vlrnn
