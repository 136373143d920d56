#include "vlrnn/cells/lstm_block.h"

#include "vlrnn/cells/onednn_lstm.h"

// Shape legend: Tb = steps, B = batch, F = input features, H = hidden, L = layers.

namespace vlrnn {

LstmBlock::LstmBlock(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                     double dropout, LstmSave save, LstmRunner runner)
    : BlockRnn("lstm", 4, {"h", "c"}, input_size, hidden_size, num_layers, dropout),
      save_(save),
      runner_(runner) {}

LstmBlock::LstmBlock(const std::vector<std::vector<torch::Tensor>>& layers, double dropout,
                     LstmSave save)
    : BlockRnn(4, {"h", "c"}, layers, dropout), save_(save) {}

std::string LstmBlock::describe() const {
  // The default runner adds nothing, so that caches keyed before it existed still match.
  return RecurrentModule::describe() + " save=" + to_string(save_) +
         (runner_ == LstmRunner::kCells ? " runner=cells" : "");
}

LstmWeights LstmBlock::weights(int64_t layer) const {
  const auto& p = layer_parameters(layer);
  return {p[0], p[1], p[2], p[3]};
}

std::pair<torch::Tensor, State> LstmBlock::forward_layer(int64_t layer, const torch::Tensor& x,
                                                         const State& entry,
                                                         const torch::Tensor& mask) {
  // x [Tb, B, I], entry (h, c [1, B, H]) -> z [Tb, B, H], (h, c [1, B, H])
  // NOTE [ The LSTM layer oneDNN runs ]
  if (runner_ == LstmRunner::kOneDnnWhereItRuns && onednn_runs_lstm(x)) {
    auto [z, h, c] = onednn_lstm_layer(x, entry[0], entry[1], weights(layer), mask);
    return {z, State{h, c}};
  }
  auto [z, h, c] = lstm_layer(x, entry[0], entry[1], weights(layer), mask, save_);
  return {z, State{h, c}};
}

void LstmBlock::copy_weights_from(const torch::nn::LSTM& lstm) {
  const auto& o = lstm->options;
  TORCH_CHECK(o.proj_size() == 0, "lstm: expected an LSTM without projection, got proj_size = ",
              o.proj_size());
  copy_layers_from(*lstm, o.num_layers(), o.input_size(), o.hidden_size(), o.bidirectional(),
                   o.bias(), "lstm");
}

}  // namespace vlrnn
