#include "vlrnn/cells/lru.h"

#include <cmath>

// Shape legend: Tb = steps, B = batch, H = hidden (complex channels), L = layers,
// I = a layer's input size.

namespace vlrnn {

Lru::Lru(int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout,
         RecurrenceForm form)
    : LinearRecurrence({{"h_re", hidden_size}, {"h_im", hidden_size}}, input_size, hidden_size,
                       num_layers, dropout, form) {
  constexpr double kRadiusMin = 0.9, kRadiusMax = 0.999, kMaxPhase = 2.0 * M_PI;
  const int64_t h = hidden_size;
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t in = layer_input_size(l);
    auto& m = layer_module(l);
    // |λ|² uniform on [r_min², r_max²]: ν = log(-log|λ|), |λ| = exp(-exp(ν)).
    const auto radius_sq = torch::rand({h}) * (kRadiusMax * kRadiusMax - kRadiusMin * kRadiusMin) +
                           kRadiusMin * kRadiusMin;  // [H]
    const auto nu = -0.5 * torch::log(radius_sq);
    LayerParameters p;
    p.nu_log = m.register_parameter("nu_log", torch::log(nu));
    p.theta_log = m.register_parameter("theta_log", torch::log(kMaxPhase * torch::rand({h})));
    p.gamma_log = m.register_parameter("gamma_log", 0.5 * torch::log(1 - radius_sq));
    p.b_re = m.register_parameter("B_re", torch::randn({h, in}) / std::sqrt(2.0 * double(in)));
    p.b_im = m.register_parameter("B_im", torch::randn({h, in}) / std::sqrt(2.0 * double(in)));
    p.c_re = m.register_parameter("C_re", torch::randn({h, h}) / std::sqrt(double(h)));
    p.c_im = m.register_parameter("C_im", torch::randn({h, h}) / std::sqrt(double(h)));
    p.d = m.register_parameter("D", torch::randn({h, in}) / std::sqrt(double(in)));
    layers_.push_back(p);
  }
}

LinearRecurrence::Coefficients Lru::coefficients(int64_t layer, const torch::Tensor& x) {
  auto& p = layers_[size_t(layer)];
  // λ in real arithmetic, then one complex tensor: [H]
  const auto magnitude = torch::exp(-torch::exp(p.nu_log));
  const auto phase = torch::exp(p.theta_log);
  const auto lambda = torch::complex(magnitude * torch::cos(phase), magnitude * torch::sin(phase));
  const auto gamma = torch::exp(p.gamma_log);                        // [H]
  const auto u = torch::complex(torch::matmul(x, p.b_re.t()) * gamma,
                                torch::matmul(x, p.b_im.t()) * gamma);  // [Tb, B, H] complex
  return {lambda.expand(u.sizes()), u, {}};
}

torch::Tensor Lru::readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                           const Coefficients&) {
  auto& p = layers_[size_t(layer)];
  // Re(C h) = C_re h_re - C_im h_im; h [Tb, B, H] complex -> y [Tb, B, H]
  return torch::matmul(torch::real(h), p.c_re.t()) - torch::matmul(torch::imag(h), p.c_im.t()) +
         torch::matmul(x, p.d.t());
}

torch::Tensor Lru::to_scan_state(const State& entry) const {
  return torch::complex(entry[0].select(0, 0), entry[1].select(0, 0));  // [B, H] complex
}

State Lru::from_scan_state(const torch::Tensor& h) const {
  // [B, H] complex -> ([1, B, H], [1, B, H]) real
  return State{torch::real(h).unsqueeze(0).contiguous(), torch::imag(h).unsqueeze(0).contiguous()};
}

}  // namespace vlrnn
