#pragma once
// One GRU layer over a whole block of steps, with a hand-written backward over the block
// (a custom autograd Function): forward runs the Tb steps; backward runs them in reverse and
// then forms every weight gradient with block-sized GEMMs over all Tb * B rows at once
// (dW_hh = Σ_t δG_t^T h_{t-1} as [3H, Tb*B] x [Tb*B, H], dW_ih and dx likewise), never
// per step. Formulas and variants: vlrnn/cells/gru_variant.h.
// Shapes: x [Tb, B, F], h_entry [1, B, H], mask [Tb, B] -> z [Tb, B, H], h_exit [1, B, H].
//
// NOTE [ What each variant saves ] (per step and sequence, in numbers, besides x and the
// states h_1 .. h_Tb, which are the output z):
//   v1, v2  r, u, n and r ⊙ h_{t-1} (the W_hn GEMM's operand, for dW_hn)   = 4H; backward peak 7H
//   v3      r, u, n and ghn = W_hn h_{t-1} + b_hn (for δr)                 = 4H; forward peak 7H
//           (with the input GEMM's output gx), backward peak 8H
//   v4      the pre-activations a_r, a_u, a_n alone, accumulated in place in gx = 3H; forward
//           peak 3H, backward peak 7H. The price: backward recomputes r, u, n elementwise, and
//           ghn for all Tb steps in one [Tb*B, H] x [H, H] GEMM.
// How the peaks add up: docs/methods.md, "In depth". The gate-gradient layouts are described
// at backward_v1_v2 and backward_v3_v4 in gru_layer.cpp.
//
// NOTE [ Variable lengths inside a block ]: with a mask m [Tb, B] (m[t, b] = t < len_b, from
// step_mask()), every step computes h_new for every sequence, then
//   h_t = m_t ? h_new : h_{t-1}   (selected, not blended: a finished state is bit-exact)
//   z_t = m_t ? h_t : 0
// Inputs of padded steps are zeroed first, so whatever the padding holds (even inf or nan)
// never reaches an activation or a gradient. Backward, the forward in reverse:
//   δh_t += m_t ⊙ δz_t;  δh_new = m_t ⊙ δh_t;  δh_{t-1} = m_t ? (GRU backward of δh_new) : δh_t
// so padded steps contribute exactly zero to every gradient and dL/dx is zero there.
//
// The backward is not itself differentiable: double backward (create_graph = true) throws.

#include "vlrnn/cells/gru_variant.h"

#include <utility>

namespace vlrnn {

// Runs `variant` over the block; gradients flow to x, h_entry and the four weights when they
// require grad. `mask` [Tb, B] bool (undefined = every step of every sequence is valid).
std::pair<torch::Tensor, torch::Tensor> gru_layer(GruVariant variant, const torch::Tensor& x,
                                                  const torch::Tensor& h_entry,
                                                  const GruWeights& weights,
                                                  const torch::Tensor& mask = {});

// The mask of valid steps: [steps, B] bool with m[t, b] = t < lengths[b], on `device`.
torch::Tensor step_mask(const torch::Tensor& lengths, int64_t steps, const torch::Device& device);

// A block module's mask from its forward()'s `lengths` (optional, [B]): checks the shape and
// that every value lies in [0, steps], and returns step_mask() or, when `lengths` is absent
// or every sequence fills the block, an undefined tensor.
torch::Tensor block_step_mask(const torch::Tensor& lengths, int64_t batch, int64_t steps,
                              const torch::Device& device);

}  // namespace vlrnn
