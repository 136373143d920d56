#pragma once
// A diagonal selective state-space layer in the style of Mamba (Gu and Dao 2023): the decay
// depends on the input through a softplus step size. Per layer, with input x_t [B, I], H
// channels of N = kSsmStateSize states each:
//   v = silu(W_u x + b_u),  g = W_g x + b_g                  (in_proj: Linear I -> 2H)
//   Δ = softplus(W_Δ v + b_Δ)  [H]                           (dt_proj: Linear H -> H)
//   B_t, C_t = W_B v, W_C v    [N] each                      (x_proj: Linear H -> 2N, no bias)
//   A = -exp(A_log)            [H, N]
//   h_t = exp(Δ ⊙ A) ⊙ h_{t-1} + (Δ ⊙ v) B_tᵀ               [H, N]
//   y_t = h_t C_t + D ⊙ v,  z_t = W_o (y_t ⊙ silu(g)) + b_o  (out_proj: Linear H -> H)
// Mamba's short causal convolution is left out (its window would be a second state); Δ has
// a full [H, H] projection rather than a low-rank one. Initialisation as Mamba's: Δ's bias
// puts softplus(b_Δ) log-uniform in [0.001, 0.1]; A_log[:, n] = log(n + 1); D = 1.
// State: (h [L, B, H·N]), each layer's [B, H, N] flattened.

#include "vlrnn/cells/linear_recurrence.h"

namespace vlrnn {

constexpr int64_t kSsmStateSize = 4;  // N: states per channel

class SelectiveSsm : public LinearRecurrence {
 public:
  SelectiveSsm(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
               double dropout = 0.0, RecurrenceForm form = RecurrenceForm::kScan);

 protected:
  Coefficients coefficients(int64_t layer, const torch::Tensor& x) override;
  torch::Tensor readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                        const Coefficients& c) override;
  torch::Tensor to_scan_state(const State& entry) const override;
  State from_scan_state(const torch::Tensor& h) const override;

 private:
  struct LayerParameters {
    torch::nn::Linear in_proj{nullptr}, dt_proj{nullptr}, x_proj{nullptr}, out_proj{nullptr};
    torch::Tensor a_log, d;
  };
  std::vector<LayerParameters> layers_;
};

}  // namespace vlrnn
