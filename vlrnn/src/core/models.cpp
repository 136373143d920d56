#include "vlrnn/core/models.h"

#include "vlrnn/core/layer_stack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace vlrnn {
namespace {

bool covers_whole_block(const torch::Tensor& lengths, int64_t steps) {
  return !lengths.defined() || lengths.eq(steps).all().item<bool>();
}

}  // namespace

TorchRnn::TorchRnn(CellKind cell, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                   double dropout)
    : cell_(cell),
      input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      dropout_(dropout) {
  check_stack_config(input_size, hidden_size, num_layers, dropout);
  if (dropout > 0.0 && num_layers > 1) {
    for (int64_t l = 0; l < num_layers; ++l) {
      layers_.push_back(register_module(
          "layer" + std::to_string(l),
          std::make_shared<TorchRnn>(cell, l == 0 ? input_size : hidden_size, hidden_size, 1)));
    }
    return;
  }
  switch (cell) {
    case CellKind::kRnnTanh:
      rnn_ = register_module("rnn", torch::nn::RNN(torch::nn::RNNOptions(input_size, hidden_size)
                                                       .num_layers(num_layers)
                                                       .nonlinearity(torch::kTanh)));
      break;
    case CellKind::kGru:
      gru_ = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(input_size, hidden_size)
                                                       .num_layers(num_layers)));
      break;
    case CellKind::kLstm:
      lstm_ = register_module("lstm",
                              torch::nn::LSTM(torch::nn::LSTMOptions(input_size, hidden_size)
                                                  .num_layers(num_layers)));
      break;
  }
}

std::vector<StateSpec> TorchRnn::state_spec() const {
  std::vector<StateSpec> specs{{"h", {num_layers_, -1, hidden_size_}, 1}};
  if (cell_ == CellKind::kLstm) specs.push_back({"c", {num_layers_, -1, hidden_size_}, 1});
  return specs;
}

std::pair<torch::Tensor, State> TorchRnn::forward(const torch::Tensor& x_block,
                                                  const State& h_entry,
                                                  const torch::Tensor& lengths) {
  // x_block [Tb, B, F]; h_entry (h [L, B, H]) or (h, c); z [Tb, B, H]
  if (!layers_.empty()) return forward_layers_with_dropout(x_block, h_entry, lengths);
  if (covers_whole_block(lengths, x_block.size(0))) return forward_fused(x_block, h_entry);
  return forward_runs_between_ends(x_block, h_entry, lengths);
}

std::pair<torch::Tensor, State> TorchRnn::forward_fused(const torch::Tensor& x,
                                                        const State& h_entry) {
  // x [n, A, F]; h_entry (h [L, A, H]) or (h, c); z [n, A, H]
  switch (cell_) {
    case CellKind::kRnnTanh: {
      auto [z, h] = rnn_->forward(x, h_entry[0]);
      return {z, State{h}};
    }
    case CellKind::kGru: {
      auto [z, h] = gru_->forward(x, h_entry[0]);
      return {z, State{h}};
    }
    case CellKind::kLstm:
    default: {
      auto [z, hc] = lstm_->forward(x, std::make_tuple(h_entry[0], h_entry[1]));
      return {z, State{std::get<0>(hc), std::get<1>(hc)}};
    }
  }
}

// NOTE [ Runs between ends ]: between two consecutive ends of sequences in a block the set of
// sequences still running does not change, so each such run of steps is one call of the fused
// module on those sequences alone (their rows of x and of the state), and its outputs and exit
// state go back to their rows. Ended sequences keep their state and emit zeros, and no compute
// is spent on them. This computes what LibTorch's packed path computes, in at most one call
// per distinct end (B + 1), and its costs are the fused path's: per step in proportion to the
// sequences running, a backward that needs what the same steps' fused backward needs (the
// packed path slices its data per step, and each slice's backward writes zeros as large as
// the whole packed input: quadratic in the steps).
std::pair<torch::Tensor, State> TorchRnn::forward_runs_between_ends(
    const torch::Tensor& x_block, const State& h_entry, const torch::Tensor& lengths) {
  // x_block [Tb, B, F]; lengths [B] in [0, Tb]; z [Tb, B, H]
  const int64_t steps = x_block.size(0), batch = x_block.size(1);
  const auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong).clamp(0, steps).contiguous();  // [B]
  const auto* length = lengths_cpu.data_ptr<int64_t>();
  std::vector<int64_t> ends(length, length + batch);
  ends.push_back(steps);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  std::vector<torch::Tensor> outputs;  // [run, B, H] each
  std::vector<torch::Tensor> state(h_entry.begin(), h_entry.end());  // [L, B, H] each
  int64_t start = 0;
  for (const int64_t end : ends) {
    if (end <= start) continue;
    const auto running = (lengths_cpu > start).nonzero().squeeze(1);  // [A]
    const auto x_run = x_block.narrow(0, start, end - start);      // [run, B, F]
    if (running.numel() == batch) {
      auto [z, exit] = forward_fused(x_run, State(state));
      outputs.push_back(z);
      state.assign(exit.begin(), exit.end());
    } else if (running.numel() == 0) {
      outputs.push_back(torch::zeros({end - start, batch, hidden_size_}, x_block.options()));
    } else {
      const auto rows = running.to(x_block.device());
      std::vector<torch::Tensor> entry;
      for (const auto& h : state) entry.push_back(h.index_select(1, rows));
      auto [z, exit] = forward_fused(x_run.index_select(1, rows), State(std::move(entry)));
      outputs.push_back(torch::zeros({end - start, batch, hidden_size_}, x_block.options())
                            .index_copy(1, rows, z));
      for (size_t k = 0; k < state.size(); ++k) state[k] = state[k].index_copy(1, rows, exit[k]);
    }
    start = end;
  }
  return {outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 0), State(std::move(state))};
}

std::pair<torch::Tensor, State> TorchRnn::forward_layers_with_dropout(
    const torch::Tensor& x_block, const State& h_entry, const torch::Tensor& lengths) {
  const auto masks =  // [Tb, L-1, B, H], already scaled by 1 / (1 - p)
      layer_dropout_masks(is_training(), x_block.size(0), num_layers_, x_block.size(1),
                          hidden_size_, dropout_, x_block.options());
  return forward_layer_stack(x_block, h_entry, num_layers_, masks,
                             [&](int64_t l, const torch::Tensor& input, const State& entry) {
                               return layers_[l]->forward(input, entry, lengths);
                             });
}

GruLstmStack::GruLstmStack(int64_t input_size, int64_t gru_hidden, int64_t lstm_hidden,
                           double dropout) {
  gru_ = register_module("gru", std::make_shared<TorchRnn>(CellKind::kGru, input_size,
                                                           gru_hidden, 1));
  lstm_ = register_module("lstm", std::make_shared<TorchRnn>(CellKind::kLstm, gru_hidden,
                                                             lstm_hidden, 3, dropout));
}

std::vector<StateSpec> GruLstmStack::state_spec() const {
  auto specs = gru_->state_spec();
  specs[0].name = "h_gru";
  for (auto spec : lstm_->state_spec()) {
    spec.name += "_lstm";
    specs.push_back(spec);
  }
  return specs;
}

std::pair<torch::Tensor, State> GruLstmStack::forward(const torch::Tensor& x_block,
                                                      const State& h_entry,
                                                      const torch::Tensor& lengths) {
  // x_block [Tb, B, F] -> GRU -> [Tb, B, Hg] -> 3-layer LSTM -> z [Tb, B, H]
  auto [z_gru, h_gru] = gru_->forward(x_block, State{h_entry[0]}, lengths);
  auto [z, hc_lstm] = lstm_->forward(z_gru, State{h_entry[1], h_entry[2]}, lengths);
  return {z, State{h_gru[0], hc_lstm[0], hc_lstm[1]}};
}

}  // namespace vlrnn
