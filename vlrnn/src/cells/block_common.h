#pragma once
// What the hand-written block cells (gru_layer.cpp, lstm_layer.cpp) share: the block's input
// as both passes see it. Internal to vlrnn/src/cells.
// Shapes: Tb = steps in the block, B = batch, F = input features, H = hidden size.

#include <torch/torch.h>

namespace vlrnn {

struct BlockInput {
  int64_t steps = 0, batch = 0, input = 0, hidden = 0;  // Tb, B, F, H
  torch::Tensor x;     // [Tb, B, F] contiguous; padded steps zeroed
  torch::Tensor x2;    // [Tb*B, F] the same memory
  torch::Tensor h0;    // [B, H] the entry state, contiguous
  torch::Tensor mask;  // [Tb, B, 1] bool, contiguous, or undefined = every step valid
  torch::Tensor zero;  // [] 0 in x's dtype, for masking by selection

  // `zero_padding`: forward's first look at x; backward gets the already-zeroed copy.
  BlockInput(const torch::Tensor& x_in, const torch::Tensor& h_entry,
             const torch::Tensor& mask_2d, int64_t hidden_size, bool zero_padding)
      : steps(x_in.size(0)), batch(x_in.size(1)), input(x_in.size(2)), hidden(hidden_size) {
    if (mask_2d.defined()) mask = mask_2d.contiguous().unsqueeze(2);
    // NOTE [ Variable lengths inside a block ] (gru_layer.h): zero the padding, by
    // selection, so that even inf or nan padding leaves no trace.
    x = mask.defined() && zero_padding ? x_in.masked_fill(mask.logical_not(), 0)
                                       : x_in.contiguous();
    x2 = x.view({steps * batch, input});
    h0 = h_entry.select(0, 0).contiguous();
    zero = torch::zeros({}, x.options());
  }

  // z_t = m_t ? h_t : 0 for hs [Tb, B, H]; without a mask z is hs itself (saved once).
  torch::Tensor output(const torch::Tensor& hs) const {
    return mask.defined() ? torch::where(mask, hs, zero) : hs;
  }

  // [Tb*B, H]: h_0 .. h_{Tb-1}, the operand of every recurrent GEMM, as one matrix.
  torch::Tensor previous_states(const torch::Tensor& hs) const {
    return torch::cat({h0.unsqueeze(0), hs.narrow(0, 0, steps - 1)}).view({steps * batch, hidden});
  }
};

// The public entry points' checks (gru_block, lstm_block): x [Tb, B, F] with Tb >= 1 and
// the weights' F, dtype and device; mask [Tb, B] bool. Returns the mask on x's device,
// contiguous, as the autograd Function's optional input (absent = every step valid).
inline c10::optional<torch::Tensor> check_block_input(const torch::Tensor& x,
                                                      const torch::Tensor& w_ih,
                                                      const torch::Tensor& mask) {
  TORCH_CHECK(x.defined() && x.dim() == 3 && x.size(0) >= 1 && x.size(2) == w_ih.size(1),
              "x: expected shape [Tb, B, F] with Tb >= 1 and F = ", w_ih.size(1), ", got ",
              x.defined() ? x.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(x.scalar_type() == w_ih.scalar_type() && x.device() == w_ih.device(),
              "x: expected dtype ", w_ih.scalar_type(), " on ", w_ih.device(),
              " (the weights'), got ", x.scalar_type(), " on ", x.device());
  if (!mask.defined()) return c10::nullopt;
  const int64_t steps = x.size(0), batch = x.size(1);
  TORCH_CHECK(mask.scalar_type() == torch::kBool && mask.sizes() == torch::IntArrayRef({steps, batch}),
              "mask: expected a bool tensor of shape [Tb, B] = [", steps, ", ", batch, "], got ",
              mask.scalar_type(), " ", mask.sizes());
  return mask.to(x.device()).contiguous();
}

// An entry state `name` [1, B, H] in x's dtype.
inline void check_entry_state(const torch::Tensor& state, const char* name,
                              const torch::Tensor& x, int64_t hidden) {
  const int64_t batch = x.size(1);
  TORCH_CHECK(state.defined() && state.sizes() == torch::IntArrayRef({1, batch, hidden}), name,
              ": expected shape [1, B, H] = [1, ", batch, ", ", hidden, "], got ",
              state.defined() ? state.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(state.scalar_type() == x.scalar_type(), name, ": expected dtype ", x.scalar_type(),
              " (x's), got ", state.scalar_type());
}

}  // namespace vlrnn
