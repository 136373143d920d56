#include "vlrnn/cells/gru_block.h"

#include "vlrnn/cells/gru_layer.h"

// Shape legend: Tb = steps, B = batch, F = input features, H = hidden, L = layers.

namespace vlrnn {

GruBlock::GruBlock(GruVariant variant, int64_t input_size, int64_t hidden_size,
                   int64_t num_layers, double dropout)
    : BlockRnn("gru", 3, {"h"}, input_size, hidden_size, num_layers, dropout), variant_(variant) {}

GruBlock::GruBlock(GruVariant variant, const std::vector<std::vector<torch::Tensor>>& layers,
                   double dropout)
    : BlockRnn(3, {"h"}, layers, dropout), variant_(variant) {}

GruWeights GruBlock::weights(int64_t layer) const {
  const auto& p = layer_parameters(layer);
  return {p[0], p[1], p[2], p[3]};
}

std::string GruBlock::describe() const {
  return RecurrentModule::describe() + " variant=" + to_string(variant_);
}

std::pair<torch::Tensor, State> GruBlock::forward_layer(int64_t layer, const torch::Tensor& x,
                                                        const State& entry,
                                                        const torch::Tensor& mask) {
  // x [Tb, B, I], entry (h [1, B, H]) -> z [Tb, B, H], (h [1, B, H])
  auto [z, h] = gru_layer(variant_, x, entry[0], weights(layer), mask);
  return {z, State{h}};
}

void GruBlock::copy_weights_from(const torch::nn::GRU& gru) {
  const auto& o = gru->options;
  copy_layers_from(*gru, o.num_layers(), o.input_size(), o.hidden_size(), o.bidirectional(),
                   o.bias(), "gru");
}

}  // namespace vlrnn
