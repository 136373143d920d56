#include "vlrnn/cells/gru_reference.h"

// Shape legend (vlrnn/core/shapes.h): Tb = steps, B = batch, F = input features, H = hidden.

namespace vlrnn {

std::pair<torch::Tensor, torch::Tensor> gru_block_reference(GruVariant variant,
                                                            const torch::Tensor& x,
                                                            const torch::Tensor& h_entry,
                                                            const GruWeights& w,
                                                            const torch::Tensor& mask) {
  namespace F = torch::nn::functional;
  w.check("weights");
  const int64_t H = w.hidden_size();
  const auto w_hru = w.w_hh.narrow(0, 0, 2 * H), b_hru = w.b_hh.narrow(0, 0, 2 * H);  // [2H, H], [2H]
  const auto w_hn = w.w_hh.narrow(0, 2 * H, H), b_hn = w.b_hh.narrow(0, 2 * H, H);    // [H, H], [H]
  auto h = h_entry.select(0, 0);  // [B, H]
  std::vector<torch::Tensor> z;
  for (int64_t t = 0; t < x.size(0); ++t) {
    const auto gx = F::linear(x[t], w.w_ih, w.b_ih).chunk(3, 1);  // 3 x [B, H]
    torch::Tensor r, u, n;                                       // [B, H]
    if (resets_before_matmul(variant)) {
      const auto gh = F::linear(h, w_hru, b_hru).chunk(2, 1);
      r = torch::sigmoid(gx[0] + gh[0]);
      u = torch::sigmoid(gx[1] + gh[1]);
      n = torch::tanh(gx[2] + F::linear(r * h, w_hn, b_hn));
    } else {
      const auto gh = F::linear(h, w.w_hh, w.b_hh).chunk(3, 1);
      r = torch::sigmoid(gx[0] + gh[0]);
      u = torch::sigmoid(gx[1] + gh[1]);
      n = torch::tanh(gx[2] + r * gh[2]);
    }
    const auto h_new = (1 - u) * n + u * h;  // [B, H]
    if (mask.defined()) {
      const auto m = mask[t].unsqueeze(1).to(x.device());  // [B, 1]
      h = torch::where(m, h_new, h);
      z.push_back(torch::where(m, h, torch::zeros_like(h)));
    } else {
      h = h_new;
      z.push_back(h);
    }
  }
  return {torch::stack(z), h.unsqueeze(0)};  // [Tb, B, H], [1, B, H]
}

}  // namespace vlrnn
