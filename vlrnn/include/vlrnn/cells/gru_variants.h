#pragma once
// BlockGru: a one-layer GRU in one of the four variants of vlrnn/cells/gru_variant.h, whose
// backward is written by hand over the whole block (vlrnn/cells/gru_block.h). A
// RecurrentModule like the built-in models, so every gradient method runs it; registered as
// model kinds "gru_v1" .. "gru_v4" (vlrnn/core/models.h).
// State: (h [1, B, H]), as the built-in one-layer GRU. x_block [Tb, B, F] -> z_block [Tb, B, H].

#include "vlrnn/cells/gru_variant.h"
#include "vlrnn/core/recurrent_module.h"

namespace vlrnn {

class BlockGru : public RecurrentModule {
 public:
  // Parameters drawn as LibTorch draws a GRU's: uniform(-1/sqrt(H), 1/sqrt(H)).
  BlockGru(GruVariant variant, int64_t input_size, int64_t hidden_size);

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return hidden_size_; }
  std::vector<StateSpec> state_spec() const override;
  std::string describe() const override;  // the variant too: same shapes, other costs

  GruVariant variant() const { return variant_; }
  // The parameters (shared, not copied) in LibTorch's layout.
  GruWeights weights() const { return {weight_ih_, weight_hh_, bias_ih_, bias_hh_}; }

  // Copies a one-layer, unidirectional torch::nn::GRU with biases: weight_ih_l0 -> weight_ih,
  // weight_hh_l0 -> weight_hh, bias_ih_l0 -> bias_ih, bias_hh_l0 -> bias_hh. v3 and v4 then
  // compute exactly the GRU's function; v1 and v2 take the same tensors with W_hn applied to
  // r ⊙ h (a different function of the same weights).
  void copy_weights_from(const torch::nn::GRU& gru);

 private:
  GruVariant variant_;
  int64_t input_size_, hidden_size_;
  torch::Tensor weight_ih_, weight_hh_, bias_ih_, bias_hh_;  // [3H, F], [3H, H], [3H], [3H]
};

}  // namespace vlrnn
