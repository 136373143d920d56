#include "vlrnn/cells/onednn_lstm.h"

#include "block_common.h"
#include "vlrnn/cells/gru_layer.h"  // step_mask

#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/version.h>

#include <algorithm>
#include <vector>

// Shape legend (vlrnn/core/shapes.h): Tb = steps in the block, B = batch, F = input features,
// H = hidden size.

// ATen's op for one oneDNN RNN layer came with PyTorch 2.1; before it there is none to call.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define VLRNN_HAS_ONEDNN_RNN_LAYER 1
#else
#define VLRNN_HAS_ONEDNN_RNN_LAYER 0
#endif

namespace vlrnn {

bool onednn_runs_lstm(const torch::Tensor& x) {
#if VLRNN_HAS_ONEDNN_RNN_LAYER
  return at::hasMKLDNN() && at::globalContext().userEnabledMkldnn() && x.defined() &&
         x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         onednn_lstm_inference_agrees();
#else
  (void)x;
  return false;
#endif
}

namespace {

// Largest |a - b| over the largest |b|.
double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a - b).abs().max().item<double>() / scale;
}

// NOTE [ oneDNN's LSTM inference, checked ] (onednn_lstm.h): one small float32 LSTM per
// hidden size, through at::lstm as torch::nn::LSTM calls it, once under no-grad and once
// training; inputs and weights from sin/cos, so the probe draws no random numbers.
bool probe_inference_agrees() {
#if !VLRNN_HAS_ONEDNN_RNN_LAYER
  return true;  // an LSTM runs on oneDNN from PyTorch 2.1 (NOTE [ The LSTM layer oneDNN runs ])
#endif
  if (!at::hasMKLDNN()) return true;
  c10::InferenceMode not_inference(false);  // the training run needs a tensor requiring grad
  // Under a caller's torch.autocast the probe would run in bfloat16: it is float32's.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKeySet(c10::DispatchKey::AutocastCPU));
  const bool was_on = at::globalContext().userEnabledMkldnn();
  at::globalContext().setUserEnabledMkldnn(true);  // the verdict is oneDNN's, not the switch's
  const auto f32 = torch::dtype(torch::kFloat);
  auto ramp = [&](std::vector<int64_t> shape, double step, bool cosine) {
    int64_t size = 1;
    for (const int64_t d : shape) size *= d;
    auto r = torch::arange(size, f32).mul(step).reshape(shape);
    return (cosine ? r.cos() : r.sin()).mul(0.5);
  };
  bool agrees = true;
  for (const int64_t hidden : {5, 16, 64}) {
    const int64_t steps = 7, batch = 3, features = 4;
    const auto x = ramp({steps, batch, features}, 0.37, false);
    const std::vector<torch::Tensor> params = {
        ramp({4 * hidden, features}, 0.11, true), ramp({4 * hidden, hidden}, 0.07, false),
        ramp({4 * hidden}, 0.13, true), ramp({4 * hidden}, 0.05, false)};
    const auto h0 = torch::zeros({1, batch, hidden}, f32);
    auto run = [&](const torch::Tensor& input) {
      return std::get<0>(at::lstm(input, {h0, h0}, params, /*has_biases=*/true,
                                  /*num_layers=*/1, /*dropout=*/0.0, /*train=*/true,
                                  /*bidirectional=*/false, /*batch_first=*/false));
    };
    torch::Tensor inference, training;
    {
      torch::NoGradGuard no_grad;
      inference = run(x);
    }
    {
      torch::AutoGradMode grad(true);
      training = run(x.clone().requires_grad_(true)).detach();
    }
    if (relative_difference(inference, training) > 1e-4) agrees = false;
  }
  at::globalContext().setUserEnabledMkldnn(was_on);
  return agrees;
}

c10::optional<bool>& verdict_for_testing() {
  static c10::optional<bool> verdict;
  return verdict;
}

}  // namespace

bool onednn_lstm_inference_agrees() {
  if (verdict_for_testing()) return *verdict_for_testing();
  // Where they disagree, oneDNN goes off for the whole process from here on, so that every
  // pass, measurement and cost model sees one backend; the guard keeps it off in a method's
  // call should a user turn it back on.
  static const bool agrees = [] {
    const bool probed = probe_inference_agrees();
    if (!probed && at::globalContext().userEnabledMkldnn()) {
      TORCH_WARN("oneDNN's LSTM computes another function under no-grad than when training "
                 "on this processor (NOTE [ oneDNN's LSTM inference, checked ]): VLRNN turns "
                 "torch's oneDNN switch off for this process, so LSTMs run exactly on ATen's "
                 "own kernels, slower; a PyTorch with another oneDNN avoids it");
      at::globalContext().setUserEnabledMkldnn(false);
    }
    return probed;
  }();
  return agrees;
}

void set_onednn_lstm_inference_verdict_for_testing(c10::optional<bool> agrees) {
  verdict_for_testing() = agrees;
}

OneDnnLstmGuard::OneDnnLstmGuard(const torch::Tensor& x) {
  if (!x.defined() || !x.device().is_cpu() || x.scalar_type() != torch::kFloat) return;
  if (!at::hasMKLDNN() || !at::globalContext().userEnabledMkldnn()) return;
  if (onednn_lstm_inference_agrees()) return;
  at::globalContext().setUserEnabledMkldnn(false);
  switched_off_ = true;
}

OneDnnLstmGuard::~OneDnnLstmGuard() {
  if (switched_off_) at::globalContext().setUserEnabledMkldnn(true);
}

#if VLRNN_HAS_ONEDNN_RNN_LAYER
namespace {

// One call of the primitive: x [n, k, F], h, c [k, H] -> z [n, k, H], h, c [k, H]. The
// workspace is written only for a backward that autograd will run.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run_primitive(const torch::Tensor& x,
                                                                       const torch::Tensor& h,
                                                                       const torch::Tensor& c,
                                                                       const LstmWeights& w) {
  const bool train = torch::GradMode::is_enabled() &&
                     (x.requires_grad() || h.requires_grad() || c.requires_grad() ||
                      w.w_ih.requires_grad() || w.w_hh.requires_grad() ||
                      w.b_ih.requires_grad() || w.b_hh.requires_grad());
  constexpr int64_t kLstmMode = 2;  // ATen's mkldnn RNN modes: 0 relu, 1 tanh, 2 LSTM, 3 GRU
  auto out = at::mkldnn_rnn_layer(x.contiguous(), w.w_ih, w.w_hh, w.b_ih, w.b_hh, h, c,
                                  /*reverse=*/false, /*batch_sizes=*/{}, kLstmMode,
                                  w.hidden_size(), /*num_layers=*/1, /*has_biases=*/true,
                                  /*bidirectional=*/false, /*batch_first=*/false, train);
  return {std::get<0>(out), std::get<1>(out), std::get<2>(out)};
}

// NOTE [ Variable lengths on oneDNN ]: the primitive runs every sequence it is given for
// every step. So with the sequences sorted longest first (n_b valid steps each, a prefix of
// the block), each run of steps over which the same k sequences go on is one call over the
// first k; the others' states are carried as they are (frozen bit for bit) and their
// outputs are zeros, as the cell's (NOTE [ Variable lengths in lstm_block ]). Padded inputs
// are never read. A block where s sequences end takes at most s + 1 calls. The primitive
// runs on the CPU only, so the bookkeeping stays there.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run_in_segments(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& w, const torch::Tensor& valid) {
  // x [Tb, B, F], h, c [B, H], valid [B] n_b -> z [Tb, B, H], h, c [B, H]
  const int64_t steps = x.size(0), batch = x.size(1), hidden = w.hidden_size();
  const auto order = std::get<1>(valid.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const auto sorted = valid.index_select(0, order).contiguous();  // [B] n_b, longest first
  const auto* n = sorted.data_ptr<int64_t>();
  // Written in place, run by run, in the batch's own order: one [Tb, B, H] in all, so a
  // block with lengths holds what a full one does (the simulator prices it so).
  auto z = torch::zeros({steps, batch, hidden}, x.options());
  auto h = h_entry.index_select(0, order), c = c_entry.index_select(0, order);
  int64_t t0 = 0;
  while (t0 < n[0]) {
    int64_t k = 0;
    while (k < batch && n[k] > t0) ++k;  // the sequences still going at t0
    const int64_t t1 = n[k - 1];         // where the first of them ends
    const auto going = order.narrow(0, 0, k);  // [k] sorted position -> b
    auto [zk, hk, ck] = run_primitive(x.narrow(0, t0, t1 - t0).index_select(1, going),
                                      h.narrow(0, 0, k), c.narrow(0, 0, k), w);
    z.narrow(0, t0, t1 - t0).index_copy_(1, going, zk);
    h = k < batch ? torch::cat({hk, h.narrow(0, k, batch - k)}) : hk;
    c = k < batch ? torch::cat({ck, c.narrow(0, k, batch - k)}) : ck;
    t0 = t1;
  }
  const auto back = std::get<1>(order.sort());  // [B] b -> sorted position
  return {z, h.index_select(0, back), c.index_select(0, back)};
}

}  // namespace
#endif

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> onednn_lstm_layer(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& weights, const torch::Tensor& mask) {
  TORCH_CHECK(onednn_runs_lstm(x), "x: oneDNN runs no LSTM layer here (it needs PyTorch >= 2.1 "
              "built with oneDNN, its switch on, and float32 on the CPU), got ", x.scalar_type(),
              " on ", x.device(), " with PyTorch ", TORCH_VERSION);
  weights.check("weights");
  const auto mask_arg = check_block_input(x, weights.w_ih, mask);  // [Tb, B] bool, optional
  check_entry_state(h_entry, "h_entry", x, weights.hidden_size());
  check_entry_state(c_entry, "c_entry", x, weights.hidden_size());
  torch::Tensor valid;  // [B] n_b: each sequence's valid steps, the first of the block
  if (mask_arg) {
    valid = mask_arg->sum(0).to(torch::kLong);
    TORCH_CHECK(torch::equal(*mask_arg, step_mask(valid, x.size(0), torch::kCPU)),
                "mask: expected each sequence's valid steps to be the first of the block "
                "(m[t, b] = t < n_b), got a sequence with a valid step after an invalid one");
  }
#if VLRNN_HAS_ONEDNN_RNN_LAYER
  auto [z, h, c] = valid.defined()
                       ? run_in_segments(x, h_entry[0], c_entry[0], weights, valid)
                       : run_primitive(x, h_entry[0], c_entry[0], weights);
  return {z, h.unsqueeze(0), c.unsqueeze(0)};
#else
  (void)h_entry;
  (void)c_entry;
  return {};
#endif
}

}  // namespace vlrnn
