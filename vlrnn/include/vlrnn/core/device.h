#pragma once
#include <torch/torch.h>

namespace vlrnn {

// The device a tensor made on `device` lands on. `cuda` without an index means the current
// CUDA device (torch.cuda.set_device, c10::cuda::set_device), not cuda:0, for the dropout
// generator replayed, the allocator's statistics read and the GPU described alike: one of
// them taking cuda:0 while the tensors sit elsewhere would replay another generator's masks
// (a silent wrong gradient) or measure another GPU. Every other device as given. Through
// c10's device guard, which CPU-only builds have too (they never ask it for `cuda`: the
// tool refuses that device there, and no tensor lives on it).
torch::Device resolved_device(const torch::Device& device);

}  // namespace vlrnn
