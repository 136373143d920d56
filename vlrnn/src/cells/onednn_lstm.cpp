#include "vlrnn/cells/onednn_lstm.h"

#include "block_common.h"
#include "vlrnn/cells/gru_layer.h"  // step_mask

#include <ATen/Context.h>
#include <torch/version.h>

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
         x.device().is_cpu() && x.scalar_type() == torch::kFloat;
#else
  (void)x;
  return false;
#endif
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
