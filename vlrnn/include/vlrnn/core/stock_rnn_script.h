#pragma once
// A scripted stock torch.nn.LSTM / nn.GRU / nn.RNN (torch.jit.script(nn.LSTM(...)).save(path))
// run as a model file, as it is: ScriptModel (script_model.h) calls it through this adapter.
// Shapes: T = block steps, B = batch, F = input, H = hidden, L = layers.
//
// NOTE [ Stock recurrent modules in a model file ]
// Scripting nn.LSTM, nn.GRU or nn.RNN gives no `forward`, only forward__0(input, hx) and
// forward__1 (a PackedSequence). A module with forward__0, no forward and nn.RNNBase's `mode`
// is taken as stock: sizes from input_size, hidden_size and num_layers, the state its own hx
// ([L, B, H]; (h, c) for an LSTM), batch_first honoured.
// The stock forward runs every row over the whole input, so a block is split at each end of
// a sequence and forward__0 runs only the rows still going: a finished sequence keeps its
// state and emits zeros, and padding is never read, as in a packed call.
// bidirectional=True (it reads steps after the block) and proj_size > 0 are refused on load.
// Dropout between layers draws one mask per call, so the output depends on where blocks
// start (NOTE [ The RecurrentModule contract ]) and `vlrnn verify` fails it. The whole
// contract, and what it costs: docs/models.md, "A model written in Python (TorchScript)".

#include "vlrnn/core/state.h"

#include <torch/script.h>

#include <string>
#include <utility>
#include <vector>

namespace vlrnn {

class StockRnnScript {
 public:
  // Whether `module` is a scripted stock recurrent module (the NOTE above); checks nothing
  // more, so a stock module the adapter cannot run still gets the constructor's error.
  static bool is_stock(const torch::jit::Module& module);

  // Reads the attributes of `module` (the same object, not a copy); throws naming `origin`,
  // the attribute, what was expected and what was found.
  StockRnnScript(torch::jit::Module module, std::string origin);

  int64_t input_size() const { return input_size_; }    // F
  int64_t hidden_size() const { return hidden_size_; }  // H
  std::vector<StateSpec> state_spec() const;
  // e.g. "nn.LSTM(F=8, H=16, L=2, batch_first=True, dropout=0)"
  std::string describe() const;

  // The block x [T, B, F] from `state` (state_spec()'s tensors); lengths [B] int64, each
  // sequence's valid steps in [0, T]. Returns (z [T, B, H], exit state): z zero past each
  // sequence's end, the state the one after its last valid step.
  std::pair<torch::Tensor, std::vector<torch::Tensor>> forward(
      const torch::Tensor& x, const std::vector<torch::Tensor>& state,
      const torch::Tensor& lengths) const;

 private:
  // One forward__0 call on every row: x [t, b, F], state [L, b, H] each -> z [t, b, H].
  std::pair<torch::Tensor, std::vector<torch::Tensor>> run(
      const torch::Tensor& x, const std::vector<torch::Tensor>& state) const;

  torch::jit::Module module_;
  std::string origin_;
  std::string mode_;  // LSTM, GRU, RNN_TANH or RNN_RELU
  bool batch_first_ = false;
  int64_t input_size_ = 0, hidden_size_ = 0, num_layers_ = 0;
  double dropout_ = 0.0;
};

}  // namespace vlrnn
