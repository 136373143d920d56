#include "vlrnn/core/models.h"

#include "vlrnn/core/layer_stack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {
namespace {

namespace rnn_utils = torch::nn::utils::rnn;

// Runs `run_packed` on the sequences that still have steps in this block, packed, and puts
// their outputs and exit states back in batch order. Finished sequences keep their entry
// state and emit zeros: no compute is spent on them.
// Shapes: x [Tb, B, F], lengths [B] in [0, Tb], state tensors batched at dim 1.
template <typename RunPacked>
std::pair<torch::Tensor, State> forward_active_packed(const torch::Tensor& x,
                                                      const State& h_entry,
                                                      const torch::Tensor& lengths,
                                                      int64_t out_features,
                                                      RunPacked run_packed) {
  const int64_t steps = x.size(0), batch = x.size(1);
  auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong);
  auto active = (lengths_cpu > 0).nonzero().squeeze(1);  // [A]
  auto z = torch::zeros({steps, batch, out_features}, x.options());
  if (active.numel() == 0) return {z, h_entry};

  auto active_dev = active.to(x.device());
  std::vector<torch::Tensor> h_active;
  for (const auto& h : h_entry) h_active.push_back(h.index_select(1, active_dev));
  auto packed = rnn_utils::pack_padded_sequence(x.index_select(1, active_dev),
                                                lengths_cpu.index_select(0, active),
                                                /*batch_first=*/false, /*enforce_sorted=*/false);
  auto [packed_out, h_out] = run_packed(packed, State(h_active));
  auto z_active = std::get<0>(rnn_utils::pad_packed_sequence(packed_out, /*batch_first=*/false,
                                                             /*padding_value=*/0.0,
                                                             /*total_length=*/steps));  // [Tb, A, Z]
  std::vector<torch::Tensor> h_exit;
  for (size_t i = 0; i < h_entry.size(); ++i) {
    h_exit.push_back(h_entry[i].index_copy(1, active_dev, h_out[i]));
  }
  return {z.index_copy(1, active_dev, z_active), State(std::move(h_exit))};
}

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
  if (covers_whole_block(lengths, x_block.size(0))) {
    switch (cell_) {
      case CellKind::kRnnTanh: {
        auto [z, h] = rnn_->forward(x_block, h_entry[0]);
        return {z, State{h}};
      }
      case CellKind::kGru: {
        auto [z, h] = gru_->forward(x_block, h_entry[0]);
        return {z, State{h}};
      }
      case CellKind::kLstm: {
        auto [z, hc] = lstm_->forward(x_block, std::make_tuple(h_entry[0], h_entry[1]));
        return {z, State{std::get<0>(hc), std::get<1>(hc)}};
      }
    }
  }
  // NOTE [ Packed chunks ]: LibTorch's packed RNN slices the packed data once per step, and
  // the backward of every slice materialises a zero tensor as large as the whole packed
  // input: O(T^2) bytes written for T steps. Running at most kPackedChunk steps per packed
  // call keeps that to O(T * kPackedChunk) and computes exactly the same function.
  constexpr int64_t kPackedChunk = 64;
  const int64_t steps = x_block.size(0);
  std::vector<torch::Tensor> outputs;  // [<= kPackedChunk, B, H] each
  State state = h_entry;
  for (int64_t c0 = 0; c0 < steps; c0 += kPackedChunk) {
    const int64_t n = std::min(kPackedChunk, steps - c0);
    auto chunk_lengths = (lengths - c0).clamp(0, n);
    // A chunk where every sequence is active takes forward()'s fused path.
    auto [z, exit] = steps > kPackedChunk
                         ? forward(x_block.narrow(0, c0, n), state, chunk_lengths)
                         : forward_packed_chunk(x_block.narrow(0, c0, n), state, chunk_lengths);
    outputs.push_back(z);
    state = std::move(exit);
  }
  return {outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 0), state};
}

std::pair<torch::Tensor, State> TorchRnn::forward_packed_chunk(const torch::Tensor& x_block,
                                                               const State& h_entry,
                                                               const torch::Tensor& lengths) {
  return forward_active_packed(
      x_block, h_entry, lengths, hidden_size_,
      [this](const rnn_utils::PackedSequence& packed, const State& h)
          -> std::pair<rnn_utils::PackedSequence, State> {
        switch (cell_) {
          case CellKind::kRnnTanh: {
            auto [z, hn] = rnn_->forward_with_packed_input(packed, h[0]);
            return {z, State{hn}};
          }
          case CellKind::kGru: {
            auto [z, hn] = gru_->forward_with_packed_input(packed, h[0]);
            return {z, State{hn}};
          }
          case CellKind::kLstm:
          default: {
            auto [z, hc] = lstm_->forward_with_packed_input(packed, std::make_tuple(h[0], h[1]));
            return {z, State{std::get<0>(hc), std::get<1>(hc)}};
          }
        }
      });
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
