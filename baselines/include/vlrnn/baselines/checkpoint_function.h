#pragma once
// Gradient checkpointing for C++, with torch.utils.checkpoint's (reentrant) semantics:
// LibTorch has no C++ checkpoint API.
//
// checkpoint(fn, inputs) runs fn(inputs) with gradients disabled and keeps only `inputs`.
// When the backward pass reaches the outputs, fn is re-run from those inputs with gradients
// enabled and back-propagated; parameters that fn captures receive their gradients then,
// and the inputs' gradients flow on. With `preserve_rng_state` the generators are captured
// before the first run and restored for the recomputation, so dropout draws the same masks,
// and then put back where the backward pass had them.
//
// As in PyTorch's reentrant checkpoint, outputs require grad only if some input does: pass
// at least one input that requires grad (e.g. a detached copy of the entry state).

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace vlrnn {

using CheckpointFunction =
    std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

std::vector<torch::Tensor> checkpoint(CheckpointFunction fn,
                                      const std::vector<torch::Tensor>& inputs,
                                      bool preserve_rng_state = true);

}  // namespace vlrnn
