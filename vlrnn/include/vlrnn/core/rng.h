#pragma once
// Snapshots of the random-number generators a model draws from, so that a recomputed block
// or segment draws exactly what the first pass drew.
//
// NOTE [ RNG across the no-grad pass ]
// A model with dropout draws random numbers on every forward. Methods that run a block
// twice (VLRNN, checkpointing) capture the generators at the block's entry during the first
// pass and restore them before recomputing it, so both passes see the same masks. After the
// backward pass the generators are left where one forward pass would have left them, so a
// training loop draws the same numbers afterwards whichever method it uses. This is exact
// only for models whose draws depend on the steps processed, not on how the sequence was cut
// into blocks: the built-in models draw their dropout masks one step at a time for this
// reason (see TorchRnn).

#include <torch/torch.h>

namespace vlrnn {

class RngState {
 public:
  // The CPU generator, plus the CUDA generator of `device` when it is a CUDA device.
  static RngState capture(const torch::Device& device);
  void restore() const;
  bool captured() const { return cpu_state_.defined(); }
  // Bytes the snapshot holds (generator states).
  int64_t bytes() const {
    return int64_t(cpu_state_.defined() ? cpu_state_.nbytes() : 0) +
           int64_t(cuda_state_.defined() ? cuda_state_.nbytes() : 0);
  }
  // For training checkpoints: writes the snapshot into `archive`, and reads one back (a
  // CUDA generator's state only when `device` is a CUDA device).
  void save(torch::serialize::OutputArchive& archive) const;
  static RngState load(torch::serialize::InputArchive& archive, const torch::Device& device);
  // True when both snapshots hold the same tensor (NOTE [ Shared RNG snapshots ]).
  bool shares_storage_with(const RngState& other) const {
    return cpu_state_.is_same(other.cpu_state_);
  }

 private:
  torch::Tensor cpu_state_;
  torch::Tensor cuda_state_;
  c10::DeviceIndex cuda_index_ = -1;
};

// Copies of the generators themselves (engine objects, no tensor): cheap enough to take on
// every iteration and invisible to the memory meters, for putting the generators back
// when a method fails midway (NOTE [ Generators on failure ] in gradient_method.cpp).
class RngCopy {
 public:
  static RngCopy take(const torch::Device& device);
  void restore() const;

 private:
  at::Generator cpu_, cuda_;
  c10::DeviceIndex cuda_index_ = -1;
};

}  // namespace vlrnn
