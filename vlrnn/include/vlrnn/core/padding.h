#pragma once
// Steps past a sequence's end replaced by zeros before a model reads them.
// Shapes: x [n, B, ...], lengths [B] valid steps in the range.

#include <torch/torch.h>

namespace vlrnn {

// Zeros at the steps past each sequence's end (undefined lengths: x itself). A select, not
// a multiplication by a mask, so padding (NaN included) never reaches a result or a
// gradient (NOTE [ Padding never reaches the model ] in vlrnn/methods/block.h).
torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& lengths);

}  // namespace vlrnn
