#pragma once
// The reference the hand-written GRU variants are checked against: the same formulas
// (vlrnn/cells/gru_variant.h) as a plain per-step loop of LibTorch ops, differentiated by
// autograd. Slow and memory-hungry by design; for tests and the verifier only.
// Shapes: x [Tb, B, F], h_entry [1, B, H], mask [Tb, B] -> z [Tb, B, H], h_exit [1, B, H].

#include "vlrnn/cells/gru_variant.h"

#include <utility>

namespace vlrnn {

// Same contract as gru_layer() (vlrnn/cells/gru_layer.h), masking included: past a
// sequence's end its state is frozen and z is zero.
std::pair<torch::Tensor, torch::Tensor> gru_block_reference(GruVariant variant,
                                                            const torch::Tensor& x,
                                                            const torch::Tensor& h_entry,
                                                            const GruWeights& weights,
                                                            const torch::Tensor& mask = {});

}  // namespace vlrnn
