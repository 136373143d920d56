#include "vlrnn/core/rng.h"

#include "vlrnn/core/device.h"

#include <ATen/Context.h>

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

at::Generator copy_of(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.clone();
}

// The device's default generator through the Context, which both LibTorch 1.13 and 2.x
// have (2.x removed the CUDA hooks' getDefaultCUDAGenerator that 1.13 reaches it by).
const at::Generator& cuda_generator(c10::DeviceIndex index) {
  return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, index));
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

// The last snapshot of each generator in this thread: what the next capture shares.
struct LastSnapshots {
  torch::Tensor cpu, cuda;
};
LastSnapshots& last_snapshots() {
  static thread_local LastSnapshots last;
  return last;
}

}  // namespace

RngState RngState::capture(const torch::Device& device) {
  RngState snapshot;
  auto& last = last_snapshots();
  snapshot.cpu_state_ = share_if_unchanged(state_of(at::detail::getDefaultCPUGenerator()), last.cpu);
  if (device.is_cuda()) {
    snapshot.cuda_index_ = resolved_device(device).index();
    snapshot.cuda_state_ =
        share_if_unchanged(state_of(cuda_generator(snapshot.cuda_index_)), last.cuda);
  }
  return snapshot;
}

void RngState::restore() const {
  TORCH_CHECK(captured(), "RngState::restore: nothing was captured");
  set_state_of(at::detail::getDefaultCPUGenerator(), cpu_state_);
  if (cuda_state_.defined()) set_state_of(cuda_generator(cuda_index_), cuda_state_);
  // The generators now hold exactly these snapshots: the next capture shares them rather than
  // allocating an equal copy (so a measurement that restores the generators, like the
  // planner's calibration, leaves no new snapshot behind for the step around it).
  auto& last = last_snapshots();
  last.cpu = cpu_state_;
  if (cuda_state_.defined()) last.cuda = cuda_state_;
}

void RngState::save(torch::serialize::OutputArchive& archive) const {
  TORCH_CHECK(captured(), "RngState::save: nothing was captured");
  archive.write("cpu", cpu_state_);
  if (cuda_state_.defined()) archive.write("cuda", cuda_state_);
}

RngState RngState::load(torch::serialize::InputArchive& archive, const torch::Device& device) {
  RngState snapshot;
  archive.read("cpu", snapshot.cpu_state_);
  if (device.is_cuda()) {
    snapshot.cuda_index_ = resolved_device(device).index();
    TORCH_CHECK(archive.try_read("cuda", snapshot.cuda_state_), "RngState::load: the snapshot "
                "holds no CUDA generator state (it was saved for a CPU run)");
  }
  return snapshot;
}

RngCopy RngCopy::take(const torch::Device& device) {
  RngCopy copy;
  copy.cpu_ = copy_of(at::detail::getDefaultCPUGenerator());
  if (device.is_cuda()) {
    copy.cuda_index_ = resolved_device(device).index();
    copy.cuda_ = copy_of(cuda_generator(copy.cuda_index_));
  }
  return copy;
}

void RngCopy::restore() const {
  set_state_of(at::detail::getDefaultCPUGenerator(), copy_of(cpu_).get_state());
  if (cuda_.defined()) set_state_of(cuda_generator(cuda_index_), copy_of(cuda_).get_state());
}

}  // namespace vlrnn
