#pragma once
// The overall loss is a linear function of the per-step losses l[t, b]:
//   SUM:  L = sum over valid steps of l[t, b]
//   MEAN: L = mean over b of ( sum over t < len_b of l[t, b] / len_b )
//         (each sequence averaged over its own length, then over the batch; with no
//          lengths this is the plain mean over all T * B steps)
// Every gradient method computes L = sum(w * l) with the weights below, block by block.

#include <torch/torch.h>

#include <string>

namespace vlrnn {

enum class Reduction { kSum, kMean };

std::string to_string(Reduction reduction);
Reduction reduction_from_string(const std::string& name);  // "sum" | "mean"

// Weights w [T, B] for steps [t0, t0 + n) of a batch of B sequences with `lengths` [B]
// (undefined = all `total_steps` valid); zero beyond a sequence's length.
torch::Tensor step_weights(Reduction reduction, int64_t t0, int64_t n, int64_t total_steps,
                           int64_t batch, const torch::Tensor& lengths,
                           const torch::TensorOptions& options);

}  // namespace vlrnn
