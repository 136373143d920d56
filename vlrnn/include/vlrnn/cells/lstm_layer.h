#pragma once
// One LSTM layer over a whole block of steps, with a hand-written backward over the block
// (a custom autograd Function), in the shape of gru_block (vlrnn/cells/gru_layer.h):
//   forward   gx = x W_ih^T + (b_ih + b_hh) for all Tb steps: ONE [Tb*B, F] x [F, 4H] GEMM;
//             per step one [B, H] x [H, 4H] GEMM accumulated in place into gx_t, then the
//             gate work (σ, tanh, c and h updates, masking) as a few fused passes;
//   backward  the forward in reverse: per step one fused elementwise pass giving the gate
//             gradients D_t and δc_{t-1}, and one [B, 4H] x [4H, H] GEMM for δh_{t-1}; the
//             weight gradients as GEMMs over many steps at once, never per step:
//             dW_hh = D^T [h_0 .. h_{Tb-1}] ([4H, rows] x [rows, H]), dW_ih and dx alike,
//             db_ih = db_hh = Σ D, in chunks of ~1000+ rows (one GEMM each per chunk; NOTE
//             [ lstm_block backward in chunks ] in lstm_layer.cpp).
// Shapes: Tb = steps in the block, B = batch, F = input features, H = hidden size.
// x [Tb, B, F], h_entry [1, B, H], c_entry [1, B, H], mask [Tb, B]
//   -> z [Tb, B, H], h_exit [1, B, H], c_exit [1, B, H].
//
// Gate order (i, f, g, o) = (input, forget, cell, output), LibTorch's, so the weights are
// torch::nn::LSTM's weight_ih_l{k} [4H, F], weight_hh_l{k} [4H, H], bias_ih_l{k},
// bias_hh_l{k} [4H] one to one. One step, for x_t [B, F], h = h_{t-1}, c = c_{t-1}:
//   (a_i, a_f, a_g, a_o) = x_t W_ih^T + b_ih + h W_hh^T + b_hh      [B, 4H]
//   i, f, o = σ(a_i), σ(a_f), σ(a_o);  g = tanh(a_g)
//   c_t = f ⊙ c + i ⊙ g;  h_t = o ⊙ tanh(c_t)
//
// NOTE [ What lstm_block saves ] (per step and sequence, in numbers; both modes also keep x,
// h_1 .. h_Tb (the output z) and c_1 .. c_Tb, 2H):
//   kGates           the activations (i, f, g, o), written over the pre-activations in place:
//                    4H saved; backward recomputes only tanh(c_t) (H transcendentals).
//   kPreactivations  the pre-activations (a_i, a_f, a_g, a_o): also 4H saved; backward
//                    recomputes σ and tanh of all four (4H transcendentals more per step).
// Unlike GRU v4 (which drops W_hn h + b_hn by saving pre-activations), an LSTM's
// pre-activations are no smaller than its gates: the two modes hold the same bytes, and
// kPreactivations only adds backward work. kGates is the default; bench_lstm_block measures
// both (results/cpu-lstm-block/). Backward adds one chunk of D (at most 4M numbers).
//
// NOTE [ Variable lengths in lstm_block ]: as in gru_block (NOTE [ Variable lengths inside a
// block ] in gru_layer.h), with m_t = mask[t]:
//   (h_t, c_t) = m_t ? (h_new, c_new) : (h_{t-1}, c_{t-1})   (selected: frozen bit-exactly)
//   z_t = m_t ? h_t : 0
// Padded inputs are zeroed first (NaN padding never reaches an activation or gradient);
// backward: δh_t += m_t ? δz_t : 0; a frozen step passes δh_t and δc_t straight through and
// its gate gradients are exactly 0, so it adds nothing to any weight gradient.
//
// The fused gate passes are CPU loops (float and double); on other devices the same
// arithmetic runs as LibTorch ops (NOTE [ lstm_block off the CPU ] in lstm_layer.cpp).
// The backward is not itself differentiable: double backward (create_graph = true) throws.

#include <torch/torch.h>

#include <string>
#include <tuple>

namespace vlrnn {

// A one-layer LSTM's parameters in LibTorch's layout (torch::nn::LSTM's *_l{k}).
struct LstmWeights {
  torch::Tensor w_ih;  // [4H, F]  rows (W_ii, W_if, W_ig, W_io)
  torch::Tensor w_hh;  // [4H, H]  rows (W_hi, W_hf, W_hg, W_ho)
  torch::Tensor b_ih;  // [4H]
  torch::Tensor b_hh;  // [4H]

  int64_t input_size() const { return w_ih.size(1); }   // F
  int64_t hidden_size() const { return w_hh.size(1); }  // H
  // Throws naming `argument` when the four tensors do not form one LSTM layer.
  void check(const std::string& argument) const;
};

// What forward keeps for backward (NOTE [ What lstm_block saves ]).
enum class LstmSave { kGates, kPreactivations };
std::string to_string(LstmSave save);  // "gates", "preactivations"

// Runs one LSTM layer over the block; gradients flow to x, h_entry, c_entry and the four
// weights when they require grad. `mask` [Tb, B] bool (undefined = every step valid).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> lstm_layer(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& weights, const torch::Tensor& mask = {},
    LstmSave save = LstmSave::kGates);

// Tests only: false runs the gate work as LibTorch ops on the CPU too (NOTE [ lstm_block off
// the CPU ]), so that the path other devices take is checked against the CPU loops here.
void set_lstm_layer_cpu_loops_for_testing(bool enabled);

}  // namespace vlrnn
