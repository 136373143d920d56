#include "vlrnn/core/layer_stack.h"

// Shape legend: Tb = steps in the block, L = layers, B = batch, H = hidden.

#include <vector>

namespace vlrnn {

void check_stack_config(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                        double dropout) {
  TORCH_CHECK(input_size > 0, "input_size: expected > 0, got ", input_size);
  TORCH_CHECK(hidden_size > 0, "hidden_size: expected > 0, got ", hidden_size);
  TORCH_CHECK(num_layers >= 1, "num_layers: expected >= 1, got ", num_layers);
  TORCH_CHECK(dropout >= 0.0 && dropout < 1.0, "dropout: expected a probability in [0, 1), got ",
              dropout);
}

torch::Tensor draw_layer_dropout_masks(int64_t steps, int64_t layers, int64_t batch,
                                       int64_t hidden, double dropout,
                                       const torch::TensorOptions& options) {
  // NOTE [ Dropout masks drawn per step ] (layer_stack.h)
  auto keep = torch::full({layers - 1, batch, hidden}, 1.0 - dropout,
                          options.requires_grad(false));  // [L-1, B, H]
  std::vector<torch::Tensor> per_step;
  for (int64_t t = 0; t < steps; ++t) per_step.push_back(torch::bernoulli(keep));
  return torch::stack(per_step).div_(1.0 - dropout);  // [Tb, L-1, B, H]
}

torch::Tensor layer_dropout_masks(bool training, int64_t steps, int64_t layers, int64_t batch,
                                  int64_t hidden, double dropout,
                                  const torch::TensorOptions& options) {
  if (!training || dropout <= 0.0 || layers < 2) return {};
  return draw_layer_dropout_masks(steps, layers, batch, hidden, dropout, options);
}

std::pair<torch::Tensor, State> forward_layer_stack(const torch::Tensor& x_block,
                                                    const State& h_entry, int64_t layers,
                                                    const torch::Tensor& masks,
                                                    const LayerForward& layer) {
  auto input = x_block;  // [Tb, B, F] for layer 0, [Tb, B, H] above
  std::vector<std::vector<torch::Tensor>> exits(h_entry.size());  // [component][layer]
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<torch::Tensor> layer_entry;  // each [1, B, H]
    for (const auto& h : h_entry) layer_entry.push_back(h.narrow(0, l, 1));
    auto [z, exit] = layer(l, input, State(std::move(layer_entry)));
    for (size_t i = 0; i < exit.size(); ++i) exits[i].push_back(exit[i]);
    input = (masks.defined() && l + 1 < layers) ? z * masks.select(1, l) : z;
  }
  std::vector<torch::Tensor> h_exit;  // each [L, B, H]
  for (auto& per_layer : exits) h_exit.push_back(layers == 1 ? per_layer[0] : torch::cat(per_layer, 0));
  return {input, State(std::move(h_exit))};
}

}  // namespace vlrnn
