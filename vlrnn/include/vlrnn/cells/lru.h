#pragma once
// The Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting recurrent neural networks for
// long sequences"): a complex diagonal recurrence whose decay is parametrised
// exponentially and whose input is normalised. Per layer, with input x_t [B, I] and a
// complex state of H channels:
//   λ = exp(-exp(ν) + i·exp(θ))                         (|λ| < 1 for any ν, θ)
//   h_t = λ ⊙ h_{t-1} + γ ⊙ (B x_t),   γ = exp(γ_log)     (initialised to sqrt(1 - |λ|²))
//   y_t = Re(C h_t) + D x_t
// B and C are complex (stored as real and imaginary parts), D is real; D is a dense [H, I]
// matrix here, so that layer 0 can have F != H (the paper's D is diagonal, with I = H).
// Initialisation as the paper's: |λ| uniform on the ring [0.9, 0.999], phase uniform in
// [0, 2π], B ~ N(0, 1/(2I)), C ~ N(0, 1/H); D ~ N(0, 1/I).
// The recurrence runs in complex arithmetic (vlrnn/cells/linear_scan.h); the state crosses
// the block boundary as real pairs, so every method stores and compares real tensors.
// State: (h_re [L, B, H], h_im [L, B, H]). Parameters of layer l under "layer{l}.": nu_log,
// theta_log, gamma_log [H], B_re, B_im [H, I], C_re, C_im [H, H], D [H, I].

#include "vlrnn/cells/linear_recurrence.h"

namespace vlrnn {

class Lru : public LinearRecurrence {
 public:
  Lru(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, double dropout = 0.0,
      RecurrenceForm form = RecurrenceForm::kScan);

 protected:
  Coefficients coefficients(int64_t layer, const torch::Tensor& x) override;
  torch::Tensor readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                        const Coefficients& c) override;
  torch::Tensor to_scan_state(const State& entry) const override;
  State from_scan_state(const torch::Tensor& h) const override;

 private:
  struct LayerParameters {
    torch::Tensor nu_log, theta_log, gamma_log, b_re, b_im, c_re, c_im, d;
  };
  std::vector<LayerParameters> layers_;
};

}  // namespace vlrnn
