#include "vlrnn/cells/selective_ssm.h"

#include <cmath>

// Shape legend: Tb = steps, B = batch, H = hidden (channels), N = states per channel,
// L = layers, I = a layer's input size.

namespace vlrnn {

SelectiveSsm::SelectiveSsm(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                           double dropout, RecurrenceForm form)
    : LinearRecurrence({{"h", hidden_size * kSsmStateSize}}, input_size, hidden_size, num_layers,
                       dropout, form) {
  const int64_t h = hidden_size, n = kSsmStateSize;
  for (int64_t l = 0; l < num_layers; ++l) {
    auto& m = layer_module(l);
    LayerParameters p;
    p.in_proj = m.register_module("in_proj", torch::nn::Linear(layer_input_size(l), 2 * h));
    p.dt_proj = m.register_module("dt_proj", torch::nn::Linear(h, h));
    p.x_proj = m.register_module(
        "x_proj", torch::nn::Linear(torch::nn::LinearOptions(h, 2 * n).bias(false)));
    p.out_proj = m.register_module("out_proj", torch::nn::Linear(h, h));
    torch::NoGradGuard no_grad;
    // softplus(b_Δ) = Δ0, log-uniform in [0.001, 0.1]: b_Δ = Δ0 + log(1 - exp(-Δ0)).
    const auto dt = torch::exp(torch::rand({h}) * (std::log(0.1) - std::log(0.001)) + std::log(0.001));
    p.dt_proj->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
    p.a_log = m.register_parameter(
        "A_log", torch::log(torch::arange(1, n + 1, torch::kFloat)).repeat({h, 1}));  // [H, N]
    p.d = m.register_parameter("D", torch::ones({h}));
    layers_.push_back(p);
  }
}

LinearRecurrence::Coefficients SelectiveSsm::coefficients(int64_t layer, const torch::Tensor& x) {
  auto& p = layers_[size_t(layer)];
  const auto ug = p.in_proj(x).chunk(2, 2);                    // 2 x [Tb, B, H]
  const auto v = torch::silu(ug[0]);                           // [Tb, B, H]
  const auto dt = torch::softplus(p.dt_proj(v));               // [Tb, B, H]
  const auto bc = p.x_proj(v).chunk(2, 2);                     // 2 x [Tb, B, N]
  const auto decay = -torch::exp(p.a_log);                     // [H, N]
  const auto a = torch::exp(dt.unsqueeze(3) * decay);          // [Tb, B, H, N]
  const auto b = (dt * v).unsqueeze(3) * bc[0].unsqueeze(2);   // [Tb, B, H, N]
  return {a, b, {v, ug[1], bc[1]}};
}

torch::Tensor SelectiveSsm::readout(int64_t layer, const torch::Tensor& h, const torch::Tensor&,
                                    const Coefficients& c) {
  auto& p = layers_[size_t(layer)];
  const auto &v = c.saved[0], &gate = c.saved[1], &c_t = c.saved[2];
  const auto y = (h * c_t.unsqueeze(2)).sum(3) + p.d * v;  // [Tb, B, H]
  return p.out_proj(y * torch::silu(gate));
}

torch::Tensor SelectiveSsm::to_scan_state(const State& entry) const {
  const auto& h = entry[0];  // [1, B, H·N]
  return h.select(0, 0).reshape({h.size(1), output_size(), kSsmStateSize});  // [B, H, N]
}

State SelectiveSsm::from_scan_state(const torch::Tensor& h) const {
  return State{h.reshape({1, h.size(0), h.size(1) * h.size(2)})};  // [B, H, N] -> [1, B, H·N]
}

}  // namespace vlrnn
