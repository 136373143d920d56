#pragma once
// LstmBlock: an LSTM of L >= 1 layers whose backward is written by hand over the whole block,
// layer by layer (vlrnn/cells/lstm_layer.h). Registered as the model kind "lstm_block"
// (vlrnn/core/models.h): it computes the built-in "lstm" kind's function with the same
// parameter names, state layout and dropout draws (vlrnn/cells/block_rnn.h), so the two
// are interchangeable and every gradient method runs it.
// State: (h [L, B, H], c [L, B, H]). x_block [Tb, B, F] -> z_block [Tb, B, H].

#include "vlrnn/cells/block_rnn.h"
#include "vlrnn/cells/lstm_layer.h"

namespace vlrnn {

class LstmBlock : public BlockRnn {
 public:
  // Parameters drawn as LibTorch draws an LSTM's: uniform(-1/sqrt(H), 1/sqrt(H)).
  LstmBlock(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
            double dropout = 0.0, LstmSave save = LstmSave::kGates);
  // Over `layers`' tensors, shared, not copied (BlockRnn's constructor that takes them).
  LstmBlock(const std::vector<std::vector<torch::Tensor>>& layers, double dropout,
            LstmSave save = LstmSave::kGates);

  LstmSave save() const { return save_; }
  std::string describe() const override;  // the save mode too: same shapes, other costs
  // Layer l's parameters (shared, not copied) in LibTorch's layout.
  LstmWeights weights(int64_t layer = 0) const;

  // Copies a unidirectional torch::nn::LSTM with biases, no projection, and this model's
  // sizes and layers: weight_ih_l{l} -> layer l's w_ih, and so on.
  void copy_weights_from(const torch::nn::LSTM& lstm);

 protected:
  std::pair<torch::Tensor, State> forward_layer(int64_t layer, const torch::Tensor& x,
                                                const State& entry,
                                                const torch::Tensor& mask) override;

 private:
  LstmSave save_;
};

}  // namespace vlrnn
