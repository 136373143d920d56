#pragma once
// One LSTM layer over a block on oneDNN's RNN primitive, through ATen's op for it
// (at::mkldnn_rnn_layer: what torch::nn::LSTM itself runs on the CPU in float32 on
// PyTorch >= 2.1 built with oneDNN). Autograd differentiates it to x, the entry state and the
// four weights, so the gradients at block boundaries come with it.
// Shapes: Tb = steps in the block, B = batch, F = input features, H = hidden size.
// x [Tb, B, F], h_entry, c_entry [1, B, H] -> z [Tb, B, H], h_exit, c_exit [1, B, H].
//
// NOTE [ The LSTM layer oneDNN runs ]
// On PyTorch 2.x's CPU, float32, oneDNN's primitive keeps W_hh packed across the steps and has
// a forward-inference mode that writes no workspace. There it runs a block faster than the
// hand-written cell over the BLAS (lstm_layer.h), which repacks W_hh at every step's GEMM
// (docs/platforms.md, "The LSTM on oneDNN"). So LstmBlock runs a layer on it wherever
// onednn_runs_lstm says it can; the cell runs the rest (float64, PyTorch 1.13). Lengths
// that end inside a block split it into calls (NOTE [ Variable lengths on oneDNN ] in
// onednn_lstm.cpp). Dropout between layers stays LstmBlock's, drawn per step. PyTorch's own
// switch turns it off (torch.backends.mkldnn.enabled = False in Python,
// at::globalContext().setUserEnabledMkldnn(false) in C++): then the cell runs every block.

#include "vlrnn/cells/lstm_layer.h"

#include <torch/torch.h>

#include <tuple>

namespace vlrnn {

// Whether this LibTorch runs an LSTM layer over x (its dtype and device) on oneDNN: built
// with it (PyTorch >= 2.1), the user's switch on, x float32 on the CPU, and its inference
// mode computing what its training mode does (onednn_lstm_inference_agrees()).
bool onednn_runs_lstm(const torch::Tensor& x);

// NOTE [ oneDNN's LSTM inference, checked ]
// On some processors oneDNN's LSTM primitive computes another function in forward-inference
// mode than in forward-training mode: small float32 LSTMs far off under no-grad, their
// training pass right (docs/platforms.md). ATen picks the mode from grad mode alone, so
// each no-grad pass (VLRNN's, checkpointing's, the planner's) would hand wrong states to the
// next block: a silent wrong gradient. So once per process (when the first model or
// method is made), a small LSTM runs both ways through ATen's own dispatch; where they
// disagree, torch's oneDNN switch goes off for the process, so every pass, measurement and
// cost model runs ATen's own kernels, and OneDnnLstmGuard keeps it off in each method's
// call. Exact, slower, and said once.
bool onednn_lstm_inference_agrees();

// For the length of a gradient method's call on `x` (the batch's inputs): where x is float32
// on the CPU, oneDNN is on (a user turned it back on) and onednn_lstm_inference_agrees() is
// false, ATen's oneDNN switch (at::globalContext().userEnabledMkldnn()) is off, and restored
// when the guard ends. The switch is the process's: another thread's oneDNN ops meanwhile
// take ATen's native paths (slower, not wrong).
class OneDnnLstmGuard {
 public:
  explicit OneDnnLstmGuard(const torch::Tensor& x);
  ~OneDnnLstmGuard();
  OneDnnLstmGuard(const OneDnnLstmGuard&) = delete;
  OneDnnLstmGuard& operator=(const OneDnnLstmGuard&) = delete;
  bool switched_off() const { return switched_off_; }

 private:
  bool switched_off_ = false;
};

// Tests only: the verdict onednn_lstm_inference_agrees() gives from now on (nullopt: the
// probe's own), so that the guard's both sides run on every machine.
void set_onednn_lstm_inference_verdict_for_testing(c10::optional<bool> agrees);

// The layer on oneDNN; throws unless onednn_runs_lstm(x). `mask` [Tb, B] bool, each
// sequence's valid steps a prefix (undefined = every step valid): past its end a sequence's
// state is frozen and its output 0, as lstm_layer's. Trains (keeps a workspace for the
// backward) only where autograd will record it: grad mode on and some input requiring grad.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> onednn_lstm_layer(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& weights, const torch::Tensor& mask = {});

}  // namespace vlrnn
