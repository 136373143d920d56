#pragma once
// minGRU and minLSTM (Feng et al. 2024, "Were RNNs all we needed?"): a GRU and an LSTM whose
// gates read only the input, so that the state follows a linear recurrence that a scan can
// run (vlrnn/cells/linear_recurrence.h). Per layer, with input x_t [B, I]:
//   minGRU   z = σ(W_z x + b_z), h̃ = W_h x + b_h          (one Linear I -> 2H, "layer{l}.proj")
//            h_t = (1 - z) ⊙ h_{t-1} + z ⊙ h̃
//   minLSTM  f = σ(W_f x + b_f), i = σ(W_i x + b_i), h̃ = W_h x + b_h   (Linear I -> 3H)
//            h_t = f/(f + i) ⊙ h_{t-1} + i/(f + i) ⊙ h̃   (the paper's normalised gates)
// The output is h_t. State: (h [L, B, H]). Parameters drawn as torch::nn::Linear draws them.

#include "vlrnn/cells/linear_recurrence.h"

namespace vlrnn {

class MinGru : public LinearRecurrence {
 public:
  MinGru(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, double dropout = 0.0,
         RecurrenceForm form = RecurrenceForm::kScan);

 protected:
  Coefficients coefficients(int64_t layer, const torch::Tensor& x) override;
  torch::Tensor readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                        const Coefficients& c) override;

 private:
  std::vector<torch::nn::Linear> proj_;  // [L] I -> 2H
};

class MinLstm : public LinearRecurrence {
 public:
  MinLstm(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, double dropout = 0.0,
          RecurrenceForm form = RecurrenceForm::kScan);

 protected:
  Coefficients coefficients(int64_t layer, const torch::Tensor& x) override;
  torch::Tensor readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                        const Coefficients& c) override;

 private:
  std::vector<torch::nn::Linear> proj_;  // [L] I -> 3H
};

}  // namespace vlrnn
