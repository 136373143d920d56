#pragma once
// BlockRnn: what the recurrent models with a hand-written block backward share (GruBlock,
// vlrnn/cells/gru_block.h; LstmBlock, vlrnn/cells/lstm_block.h): L >= 1 stacked layers,
// dropout between them drawn one step at a time exactly as the built-in models draw it
// (NOTE [ Dropout masks drawn per step ] in vlrnn/core/layer_stack.h), variable lengths as a
// per-step mask, and parameters in LibTorch's layout under the built-in models' names, so
// that a model and its built-in counterpart ("gru", "lstm") are interchangeable:
//   without dropout between layers  "<cell>.weight_ih_l{l}", "<cell>.weight_hh_l{l}",
//                                   "<cell>.bias_ih_l{l}", "<cell>.bias_hh_l{l}"
//   with dropout and L > 1          "layer{l}.<cell>.weight_ih_l0", ... (one module per layer)
// and drawn in the same order from the same distribution, so the same seed gives the same
// weights as the built-in model. A model may instead run over tensors it is given, shared, not
// copied (a Python module's parameters: vlrnn.nn), under LibTorch's flat names
// "weight_ih_l{l}", ...
// Shapes: Tb = steps, B = batch, F = input features, H = hidden, L = layers, G = gates (3 for
// a GRU, 4 for an LSTM). State: S tensors ((h) or (h, c)), each [L, B, H].

#include "vlrnn/core/recurrent_module.h"

#include <string>
#include <vector>

namespace vlrnn {

// Throws naming `argument` unless (w_ih [G*H, F], w_hh [G*H, H], b_ih [G*H], b_hh [G*H])
// form one layer of a `gates`-gate cell, all with one dtype and device.
void check_layer_weights(const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                         const torch::Tensor& b_ih, const torch::Tensor& b_hh, int64_t gates,
                         const std::string& argument);

class BlockRnn : public RecurrentModule {
 public:
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  // forward with the dropout masks between layers given, [Tb, L-1, B, H] already scaled by
  // 1 / (1 - p), or undefined for none: for a caller that draws them otherwise (vlrnn.nn's
  // modules draw a PackedSequence's for the sequences present at each step).
  std::pair<torch::Tensor, State> forward_with_masks(const torch::Tensor& x_block,
                                                     const State& h_entry,
                                                     const torch::Tensor& lengths,
                                                     const torch::Tensor& masks);
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return hidden_size_; }
  std::vector<StateSpec> state_spec() const override;

  int64_t num_layers() const { return num_layers_; }
  double dropout() const { return dropout_; }

 protected:
  // `cell` names the parameters ("gru", "lstm"); `state_names` the state tensors.
  BlockRnn(const std::string& cell, int64_t gates, std::vector<std::string> state_names,
           int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout);
  // Over `layers`' tensors, shared: layers[l] = (w_ih, w_hh, b_ih, b_hh), or (w_ih, w_hh) in
  // every layer for a cell without biases (zeros stand in for them, held but not registered).
  BlockRnn(int64_t gates, std::vector<std::string> state_names,
           const std::vector<std::vector<torch::Tensor>>& layers, double dropout);

  // One layer over the block: x [Tb, B, I], entry (each [1, B, H]), mask [Tb, B] bool or
  // undefined -> (z [Tb, B, H], exit (each [1, B, H])).
  virtual std::pair<torch::Tensor, State> forward_layer(int64_t layer, const torch::Tensor& x,
                                                        const State& entry,
                                                        const torch::Tensor& mask) = 0;

  // Layer l's (w_ih, w_hh, b_ih, b_hh), shared, not copied.
  const std::vector<torch::Tensor>& layer_parameters(int64_t layer) const;

  // Copies a torch::nn::GRU / LSTM's weight_ih_l{l} .. bias_hh_l{l} (`source`, with
  // `source_layers` layers, sizes `source_input` and `source_hidden`), naming `argument`.
  void copy_layers_from(const torch::nn::Module& source, int64_t source_layers,
                        int64_t source_input, int64_t source_hidden, bool bidirectional,
                        bool bias, const std::string& argument);

 private:
  // Throws unless x_block is [Tb, B, F] with this model's F.
  void check_block_input(const torch::Tensor& x_block) const;

  int64_t gates_;
  std::vector<std::string> state_names_;
  int64_t input_size_, hidden_size_, num_layers_;
  double dropout_;
  std::vector<std::vector<torch::Tensor>> layers_;  // [L] x (w_ih, w_hh, b_ih, b_hh)
};

}  // namespace vlrnn
