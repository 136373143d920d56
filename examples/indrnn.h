#pragma once
// A recurrent cell VLRNN does not ship, written as a RecurrentModule: the user's side of
// "bring your own model". examples/custom_cell.cpp verifies it; examples/indrnn_plugin.cpp
// registers it in the stock `vlrnn` tool. Shapes: T = block steps, B = batch, F = input,
// H = hidden; x_block [T, B, F], state (h [B, H]), z_block [T, B, H].

#include <vlrnn/vlrnn.h>

// --- README custom cell begin ---
// IndRNN (Li et al., 2018): h_t = relu(W x_t + b + u * h_{t-1}), each unit recurrent on itself.
class IndRnn : public vlrnn::RecurrentModule {
 public:
  IndRnn(int64_t input_size, int64_t hidden_size)
      : input_(register_module("input", torch::nn::Linear(input_size, hidden_size))),
        u_(register_parameter("u", torch::rand({hidden_size}))) {}

  std::pair<torch::Tensor, vlrnn::State> forward(const torch::Tensor& x_block,
                                                 const vlrnn::State& h_entry,
                                                 const torch::Tensor& lengths = {}) override {
    auto h = h_entry[0];                                                   // [B, H]
    std::vector<torch::Tensor> z;                                          // [B, H] each
    for (int64_t t = 0; t < x_block.size(0); ++t) {
      // Past its end (lengths: valid steps in this block) a sequence keeps its state, emits
      // zeros and never reads its padding (which may be nan): `where`, not a multiply.
      auto valid = lengths.defined() ? (lengths.to(h.device()) > t).unsqueeze(1)  // [B, 1]
                                     : torch::ones({h.size(0), 1}, h.options().dtype(torch::kBool));
      auto x_t = torch::where(valid, x_block[t], torch::zeros_like(x_block[t]));  // [B, F]
      auto h_new = torch::relu(input_->forward(x_t) + u_ * h);
      h = torch::where(valid, h_new, h);
      z.push_back(torch::where(valid, h_new, torch::zeros_like(h_new)));
    }
    return {torch::stack(z), vlrnn::State{h}};                             // [T, B, H], (h)
  }
  int64_t input_size() const override { return input_->options.in_features(); }
  int64_t output_size() const override { return u_.size(0); }
  std::vector<vlrnn::StateSpec> state_spec() const override {
    return {{"h", {-1, output_size()}, /*batch_dim=*/0}};
  }

 private:
  torch::nn::Linear input_;
  torch::Tensor u_;  // [H] the recurrent weight: one per unit
};
// --- README custom cell end ---
