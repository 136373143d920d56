#pragma once
// The four GRU variants of Baidu SVAIL's "Optimizing RNNs with Differentiable Graphs"
// (J. Engel, 2016), and the weights they share.
//
// Shapes (vlrnn/core/shapes.h): Tb = steps in the block, B = batch, F = input features,
// H = hidden size. Gate order in every weight, bias and pre-activation: (r, u, n) = (reset,
// update, candidate) -- LibTorch's (r, z, n); the update gate is called u here so that it
// cannot be confused with the model's output z.
//
// One step, for x_t [B, F] and h = h_{t-1} [B, H]:
//   r = σ(W_ir x + b_ir + W_hr h + b_hr)
//   u = σ(W_iu x + b_iu + W_hu h + b_hu)
//   v1, v2 (Cho et al., reset BEFORE the recurrent multiply):
//     n = tanh(W_in x + b_in + W_hn (r ⊙ h) + b_hn)
//   v3, v4 (reset AFTER the recurrent multiply; exactly LibTorch's / cuDNN's GRU):
//     n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
//   h_t = (1 − u) ⊙ n + u ⊙ h
//
// What distinguishes the variants is how the GEMMs are grouped and what is saved for the
// hand-written backward (NOTE [ What each variant saves ] in gru_layer.h):
//   v1  per step: 3 input GEMMs and 3 recurrent GEMMs, one per gate (the formula as written).
//   v2  the input GEMMs of all Tb steps in one [Tb*B, F] x [F, 3H] GEMM; W_hr and W_hu in one
//       [B, H] x [H, 2H] GEMM per step; W_hn stays separate because it needs r ⊙ h.
//   v3  input GEMM as v2; all three recurrent GEMMs in one [B, H] x [H, 3H] GEMM per step,
//       activations saved at the nonlinearities (the outputs of σ and tanh).
//   v4  v3 saving at the multiplications instead: the GEMM outputs, accumulated in place into
//       the pre-activations; σ and tanh are recomputed in backward and W_hn h with one block
//       GEMM, for less memory and fewer elementwise passes in forward.

#include <torch/torch.h>

#include <string>
#include <vector>

namespace vlrnn {

enum class GruVariant { kV1, kV2, kV3, kV4 };

std::string to_string(GruVariant variant);  // "v1" .. "v4"
// Accepts "v1" .. "v4"; throws naming `argument` and the known names otherwise.
GruVariant gru_variant_from_string(const std::string& name,
                                   const std::string& argument = "variant");
std::vector<GruVariant> all_gru_variants();
// True for v1 and v2, where the reset gate multiplies h before W_hn.
bool resets_before_matmul(GruVariant variant);

// A one-layer GRU's parameters in LibTorch's layout (torch::nn::GRU's *_l0), shared by all
// four variants so that weights copy one-to-one.
struct GruWeights {
  torch::Tensor w_ih;  // [3H, F]  rows (W_ir, W_iu, W_in)
  torch::Tensor w_hh;  // [3H, H]  rows (W_hr, W_hu, W_hn)
  torch::Tensor b_ih;  // [3H]
  torch::Tensor b_hh;  // [3H]

  int64_t input_size() const { return w_ih.size(1); }   // F
  int64_t hidden_size() const { return w_hh.size(1); }  // H
  // Throws naming `argument` when the four tensors do not form one GRU layer.
  void check(const std::string& argument) const;
};

}  // namespace vlrnn
