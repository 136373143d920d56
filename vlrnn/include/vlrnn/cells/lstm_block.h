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

// Which code runs the layers: oneDNN's layer wherever onednn_runs_lstm() says torch has it,
// else the hand-written cells (the default, "lstm_block"); or the cells always (the kind
// "lstm_cells", which sets the two side by side in `vlrnn compare`). The save mode matters
// to the cells only: oneDNN keeps its own workspace.
enum class LstmRunner { kOneDnnWhereItRuns, kCells };

class LstmBlock : public BlockRnn {
 public:
  // Parameters drawn as LibTorch draws an LSTM's: uniform(-1/sqrt(H), 1/sqrt(H)).
  LstmBlock(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
            double dropout = 0.0, LstmSave save = LstmSave::kGates,
            LstmRunner runner = LstmRunner::kOneDnnWhereItRuns);
  // Over `layers`' tensors, shared, not copied (BlockRnn's constructor that takes them).
  LstmBlock(const std::vector<std::vector<torch::Tensor>>& layers, double dropout,
            LstmSave save = LstmSave::kGates);

  LstmSave save() const { return save_; }
  LstmRunner runner() const { return runner_; }
  // The save mode and the runner too: same shapes, other costs.
  std::string describe() const override;
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
  LstmRunner runner_ = LstmRunner::kOneDnnWhereItRuns;
};

}  // namespace vlrnn
