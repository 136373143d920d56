#include "vlrnn/cells/min_rnn.h"

// Shape legend: Tb = steps, B = batch, H = hidden, L = layers, I = a layer's input size.

namespace vlrnn {

MinGru::MinGru(int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout,
               RecurrenceForm form)
    : LinearRecurrence({{"h", hidden_size}}, input_size, hidden_size, num_layers, dropout, form) {
  for (int64_t l = 0; l < num_layers; ++l) {
    proj_.push_back(layer_module(l).register_module(
        "proj", torch::nn::Linear(layer_input_size(l), 2 * hidden_size)));
  }
}

LinearRecurrence::Coefficients MinGru::coefficients(int64_t layer, const torch::Tensor& x) {
  const auto parts = proj_[size_t(layer)](x).chunk(2, 2);  // 2 x [Tb, B, H]
  const auto z = torch::sigmoid(parts[0]);                 // [Tb, B, H] update gate
  return {1 - z, z * parts[1], {}};
}

torch::Tensor MinGru::readout(int64_t, const torch::Tensor& h, const torch::Tensor&,
                              const Coefficients&) {
  return h;
}

MinLstm::MinLstm(int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout,
                 RecurrenceForm form)
    : LinearRecurrence({{"h", hidden_size}}, input_size, hidden_size, num_layers, dropout, form) {
  for (int64_t l = 0; l < num_layers; ++l) {
    proj_.push_back(layer_module(l).register_module(
        "proj", torch::nn::Linear(layer_input_size(l), 3 * hidden_size)));
  }
}

LinearRecurrence::Coefficients MinLstm::coefficients(int64_t layer, const torch::Tensor& x) {
  const auto parts = proj_[size_t(layer)](x).chunk(3, 2);  // 3 x [Tb, B, H]
  const auto f = torch::sigmoid(parts[0]), i = torch::sigmoid(parts[1]);
  const auto total = f + i;  // in (0, 2): the normalised gates sum to 1
  return {f / total, i / total * parts[2], {}};
}

torch::Tensor MinLstm::readout(int64_t, const torch::Tensor& h, const torch::Tensor&,
                               const Coefficients&) {
  return h;
}

}  // namespace vlrnn
