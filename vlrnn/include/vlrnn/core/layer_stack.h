#pragma once
// Stacked recurrent layers with dropout between them, shared by every multi-layer model
// (TorchRnn with dropout, the hand-written block cells GruBlock and LstmBlock), so that
// all of them draw the same masks from the same generator state.
// Shapes: Tb = steps in the block, L = layers, B = batch, H = hidden.
//
// NOTE [ Dropout masks drawn per step ]: the masks of a block are drawn before any layer
// runs, one [L-1, B, H] Bernoulli(1 - p) draw per step, in step order, then scaled by
// 1 / (1 - p). A sequence cut into blocks anywhere therefore draws the same masks as one
// pass over it (NOTE [ RNG across the no-grad pass ] in vlrnn/core/rng.h). Masks are drawn
// for every step of every sequence, padded steps included, so the draws do not depend on
// the lengths either.

#include "vlrnn/core/state.h"

#include <torch/torch.h>

#include <functional>
#include <utility>

namespace vlrnn {

// Throws naming the argument unless F > 0, H > 0, L >= 1 and the dropout p is in [0, 1).
void check_stack_config(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                        double dropout);

// [Tb, L-1, B, H] masks in `options`' dtype, already scaled by 1 / (1 - p).
torch::Tensor draw_layer_dropout_masks(int64_t steps, int64_t layers, int64_t batch,
                                       int64_t hidden, double dropout,
                                       const torch::TensorOptions& options);
// The masks one block of a stack uses: draw_layer_dropout_masks() while `training` with
// dropout between layers (dropout > 0, L > 1); undefined (no draw at all) otherwise.
torch::Tensor layer_dropout_masks(bool training, int64_t steps, int64_t layers, int64_t batch,
                                  int64_t hidden, double dropout,
                                  const torch::TensorOptions& options);

// Runs layer(l, input [Tb, B, I], entry) for l = 0 .. L-1, where entry holds layer l's
// slice [1, B, H] of every state tensor of h_entry ([L, B, H] each) and layer returns
// (z [Tb, B, H], exit). Layer l + 1 reads z ⊙ masks[:, l] when `masks` ([Tb, L-1, B, H]) is
// defined, z otherwise. Returns the last layer's z and the exits concatenated to [L, B, H].
using LayerForward =
    std::function<std::pair<torch::Tensor, State>(int64_t, const torch::Tensor&, const State&)>;
std::pair<torch::Tensor, State> forward_layer_stack(const torch::Tensor& x_block,
                                                    const State& h_entry, int64_t layers,
                                                    const torch::Tensor& masks,
                                                    const LayerForward& layer);

}  // namespace vlrnn
