#pragma once
// A scripted stock torch.nn.LSTM / nn.GRU / nn.RNN (torch.jit.script(nn.LSTM(...)).save(path))
// run as a model file, as it is: ScriptModel (script_model.h) calls it through this adapter.
// Shapes: T = block steps, B = batch, F = input, H = hidden, L = layers.
//
// NOTE [ Stock recurrent modules in a model file ]
// Scripting nn.LSTM, nn.GRU or nn.RNN gives no `forward`: its two overloads become
// forward__0(input: Tensor, hx) and forward__1(input: PackedSequence, hx). A module is taken
// as stock when it has forward__0, no forward, and nn.RNNBase's string attribute `mode`
// (LSTM, GRU, RNN_TANH or RNN_RELU); a subclass that keeps the stock forward counts too.
// The contract the adapter applies:
// - Sizes from the module's attributes: input_size = F, hidden_size = H (z is the last
//   layer's h at every step), num_layers = L.
// - State: the module's own hx, [L, B, H] whatever batch_first says: (h, c) for an LSTM, (h)
//   for a GRU or an RNN. No h0 means zeros, as hx=None does.
// - Layout: a block x [T, B, F] goes to forward__0 as it is, or as [B, T, F] when
//   batch_first is true (and its output back to [T, B, H]).
// - Lengths: the stock forward runs every row for the whole input, so a block in which
//   sequences end is split at each end: between two consecutive ends the set of running
//   sequences is fixed, and forward__0 runs on those rows only (index_select), from their
//   state. A finished sequence keeps its state and emits zeros, and no padded step is ever
//   read (reads_padding() is false): the function is the one a packed call (forward__1)
//   computes, with no TorchScript PackedSequence to build. Cost: one call per distinct
//   nonzero length in the block (one call where every sequence runs through it).
// - Rejected on load, naming the attribute: bidirectional=True (its reverse direction reads
//   the steps after a block: no block method can run it) and proj_size > 0 (not supported).
// - Dropout between layers (nn.LSTM(..., dropout=p) in training mode) draws its masks once
//   per forward__0 call, a [t, B, H] mask for each layer in turn, so the masks depend on
//   where blocks start and on the splits above (NOTE [ The RecurrentModule contract ]), and
//   `vlrnn verify` fails it with "outputs depend on where the sequence is cut". (Two layers
//   on the CPU may happen to pass: their one mask per call comes out of the generator in
//   step order. Nothing promises it; three layers do not.) For exact gradients save the
//   module with dropout=0 (or in eval mode), or use the built-in kinds (`--model lstm`,
//   per-step masks).

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
