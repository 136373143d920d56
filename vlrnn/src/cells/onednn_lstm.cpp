#include "vlrnn/cells/onednn_lstm.h"

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

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> onednn_lstm_layer(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& weights) {
  TORCH_CHECK(onednn_runs_lstm(x), "x: oneDNN runs no LSTM layer here (it needs PyTorch >= 2.1 "
              "built with oneDNN, its switch on, and float32 on the CPU), got ", x.scalar_type(),
              " on ", x.device(), " with PyTorch ", TORCH_VERSION);
  weights.check("weights");
  const auto check_state = [&](const torch::Tensor& state, const char* name) {
    TORCH_CHECK(state.defined() && state.dim() == 3 && state.size(0) == 1 &&
                    state.size(1) == x.size(1) && state.size(2) == weights.hidden_size() &&
                    state.scalar_type() == x.scalar_type(),
                name, ": expected [1, B, H] = [1, ", x.size(1), ", ", weights.hidden_size(),
                "] in ", x.scalar_type(), ", got ",
                state.defined() ? state.sizes() : torch::IntArrayRef{}, " in ",
                state.defined() ? state.scalar_type() : torch::ScalarType::Undefined);
  };
  check_state(h_entry, "h_entry");
  check_state(c_entry, "c_entry");
#if VLRNN_HAS_ONEDNN_RNN_LAYER
  // The workspace is written only for a backward that autograd will run.
  const bool train = torch::GradMode::is_enabled() &&
                     (x.requires_grad() || h_entry.requires_grad() || c_entry.requires_grad() ||
                      weights.w_ih.requires_grad() || weights.w_hh.requires_grad() ||
                      weights.b_ih.requires_grad() || weights.b_hh.requires_grad());
  constexpr int64_t kLstmMode = 2;  // ATen's mkldnn RNN modes: 0 relu, 1 tanh, 2 LSTM, 3 GRU
  // x [Tb, B, F], h, c [B, H] -> (z [Tb, B, H], h [B, H], c [B, H], workspace)
  auto out = at::mkldnn_rnn_layer(x.contiguous(), weights.w_ih, weights.w_hh, weights.b_ih, weights.b_hh,
                                  h_entry.select(0, 0), c_entry.select(0, 0), /*reverse=*/false,
                                  /*batch_sizes=*/{}, kLstmMode, weights.hidden_size(),
                                  /*num_layers=*/1, /*has_biases=*/true,
                                  /*bidirectional=*/false, /*batch_first=*/false, train);
  return {std::get<0>(out), std::get<1>(out).unsqueeze(0), std::get<2>(out).unsqueeze(0)};
#else
  (void)h_entry;
  (void)c_entry;
  return {};
#endif
}

}  // namespace vlrnn
