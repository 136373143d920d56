#pragma once
// GruBlock: a GRU of L >= 1 layers in one of the four variants of vlrnn/cells/gru_variant.h,
// whose backward is written by hand over the whole block, layer by layer
// (vlrnn/cells/gru_layer.h). A RecurrentModule like the built-in models, so every gradient
// method runs it; registered as model kinds "gru_v1" .. "gru_v4" (vlrnn/core/models.h).
// Layers, dropout between them, lengths and parameter names: vlrnn/cells/block_rnn.h (the
// built-in "gru" kind's names, so v3 and v4 load a "gru" model's weights and compute its
// function).
// State: (h [L, B, H]), as the built-in GRU. x_block [Tb, B, F] -> z_block [Tb, B, H].

#include "vlrnn/cells/block_rnn.h"
#include "vlrnn/cells/gru_variant.h"

namespace vlrnn {

class GruBlock : public BlockRnn {
 public:
  // Parameters drawn as LibTorch draws a GRU's: uniform(-1/sqrt(H), 1/sqrt(H)).
  GruBlock(GruVariant variant, int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
           double dropout = 0.0);
  // Over `layers`' tensors, shared, not copied (BlockRnn's constructor that takes them).
  GruBlock(GruVariant variant, const std::vector<std::vector<torch::Tensor>>& layers,
           double dropout);

  std::string describe() const override;  // the variant too: same shapes, other costs

  GruVariant variant() const { return variant_; }
  // Layer l's parameters (shared, not copied) in LibTorch's layout.
  GruWeights weights(int64_t layer = 0) const;

  // Copies a unidirectional torch::nn::GRU with biases and this model's sizes and layers:
  // weight_ih_l{l} -> layer l's w_ih, and so on. v3 and v4 then compute exactly the GRU's
  // function; v1 and v2 take the same tensors with W_hn applied to r ⊙ h (a different
  // function of the same weights).
  void copy_weights_from(const torch::nn::GRU& gru);

 protected:
  std::pair<torch::Tensor, State> forward_layer(int64_t layer, const torch::Tensor& x,
                                                const State& entry,
                                                const torch::Tensor& mask) override;

 private:
  GruVariant variant_;
};

}  // namespace vlrnn
