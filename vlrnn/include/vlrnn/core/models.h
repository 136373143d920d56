#pragma once
// Built-in recurrent models. Each wraps LibTorch's own module (no re-implementation) and
// exposes it as a RecurrentModule. State layouts (L = layers):
//   ElmanRnn, Gru:  (h [L, B, H])
//   Lstm:           (h [L, B, H], c [L, B, H])
//   GruLstmStack:   (h_gru [1, B, Hg], h_lstm [3, B, H], c_lstm [3, B, H])

#include "vlrnn/core/recurrent_module.h"

#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

// Describes a built-in model; `kind` is one of model_kinds() (vlrnn/registry/models.h, which
// builds it: the factory names cells too, so it sits above core/ and cells/).
struct ModelConfig {
  std::string kind = "lstm";
  int64_t input_size = 16;   // F
  int64_t hidden_size = 32;  // H
  int64_t num_layers = 1;    // L (the composite's LSTM part always has 3)
  double dropout = 0.0;      // between stacked layers, as LibTorch's modules apply it
};

// Which cell a recurrent layer uses.
enum class CellKind { kRnnTanh, kGru, kLstm };

// One LibTorch recurrent module (RNN, GRU or LSTM) with L layers. Without dropout the L
// layers are LibTorch's one fused module. With dropout between layers they are L one-layer
// modules, and the masks are drawn one step at a time ([L-1, B, H] per step), so a block
// cut anywhere draws the same masks as one pass over the whole sequence — what exactness
// under dropout needs (NOTE [ RNG across the no-grad pass ] in vlrnn/core/rng.h).
class TorchRnn : public RecurrentModule {
 public:
  TorchRnn(CellKind cell, int64_t input_size, int64_t hidden_size, int64_t num_layers,
           double dropout = 0.0);

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return hidden_size_; }
  std::vector<StateSpec> state_spec() const override;
  // A chunk runs fused only where every sequence is active, and packed otherwise.
  bool reads_padding() const override { return false; }

  CellKind cell() const { return cell_; }
  int64_t num_layers() const { return num_layers_; }
  double dropout() const { return dropout_; }

 private:
  // Runs a block of at most a few dozen steps with some sequences shorter than the block.
  // The module itself over every row of x and h_entry.
  std::pair<torch::Tensor, State> forward_fused(const torch::Tensor& x, const State& h_entry);
  // A block where some sequences end: NOTE [ Runs between ends ] in models.cpp.
  std::pair<torch::Tensor, State> forward_runs_between_ends(const torch::Tensor& x_block,
                                                            const State& h_entry,
                                                            const torch::Tensor& lengths);
  std::pair<torch::Tensor, State> forward_layers_with_dropout(const torch::Tensor& x_block,
                                                              const State& h_entry,
                                                              const torch::Tensor& lengths);

  CellKind cell_;
  int64_t input_size_, hidden_size_, num_layers_;
  double dropout_;
  std::vector<std::shared_ptr<TorchRnn>> layers_;  // set only with dropout between layers
  torch::nn::RNN rnn_{nullptr};
  torch::nn::GRU gru_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
};

// A GRU feeding a 3-layer LSTM: proves that any module with a tuple state fits.
class GruLstmStack : public RecurrentModule {
 public:
  GruLstmStack(int64_t input_size, int64_t gru_hidden, int64_t lstm_hidden, double dropout = 0.0);

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return gru_->input_size(); }
  int64_t output_size() const override { return lstm_->output_size(); }
  std::vector<StateSpec> state_spec() const override;
  bool reads_padding() const override { return gru_->reads_padding(); }

 private:
  std::shared_ptr<TorchRnn> gru_, lstm_;
};

}  // namespace vlrnn
