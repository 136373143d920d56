#include "vlrnn/cells/linear_recurrence.h"

#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/core/layer_stack.h"

// Shape legend: Tb = steps, B = batch, F = input features, H = hidden, L = layers,
// I = a layer's input size, S... = a layer's scan state, W = a state component's width.

namespace vlrnn {

LinearRecurrence::LinearRecurrence(std::vector<StateComponent> state, int64_t input_size,
                                   int64_t hidden_size, int64_t num_layers, double dropout,
                                   RecurrenceForm form)
    : state_(std::move(state)),
      input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      dropout_(dropout),
      form_(form) {
  check_stack_config(input_size, hidden_size, num_layers, dropout);
  for (int64_t l = 0; l < num_layers; ++l) {
    layer_modules_.push_back(
        register_module("layer" + std::to_string(l), std::make_shared<torch::nn::Module>()));
  }
}

std::vector<StateSpec> LinearRecurrence::state_spec() const {
  std::vector<StateSpec> specs;
  for (const auto& s : state_) specs.push_back({s.name, {num_layers_, -1, s.width}, 1});
  return specs;
}

std::string LinearRecurrence::describe() const {
  return RecurrentModule::describe() + " form=" + to_string(form_);
}

torch::Tensor LinearRecurrence::to_scan_state(const State& entry) const {
  return entry[0].select(0, 0);  // [1, B, W] -> [B, W]
}

State LinearRecurrence::from_scan_state(const torch::Tensor& h) const {
  return State{h.unsqueeze(0)};  // [B, W] -> [1, B, W]
}

std::pair<torch::Tensor, State> LinearRecurrence::forward(const torch::Tensor& x_block,
                                                          const State& h_entry,
                                                          const torch::Tensor& lengths) {
  // x_block [Tb, B, F]; h_entry each [L, B, W]; lengths [B] -> z [Tb, B, H], each [L, B, W]
  TORCH_CHECK(x_block.defined() && x_block.dim() == 3 && x_block.size(0) >= 1 &&
                  x_block.size(2) == input_size_,
              "x_block: expected shape [Tb, B, F] with Tb >= 1 and F = ", input_size_, ", got ",
              x_block.defined() ? x_block.sizes() : torch::IntArrayRef{});
  const int64_t steps = x_block.size(0), batch = x_block.size(1);
  check_state(h_entry, batch, x_block.scalar_type(), "h_entry");
  // [Tb, B] bool; undefined when every sequence fills the block
  const auto mask = block_step_mask(lengths, batch, steps, x_block.device());
  const auto masks = layer_dropout_masks(is_training(), steps, num_layers_, batch, hidden_size_,
                                         dropout_, x_block.options());  // [Tb, L-1, B, H]
  return forward_layer_stack(x_block, h_entry, num_layers_, masks,
                             [&](int64_t l, const torch::Tensor& input, const State& entry) {
                               return forward_layer(l, input, entry, mask);
                             });
}

std::pair<torch::Tensor, State> LinearRecurrence::forward_layer(int64_t layer,
                                                                const torch::Tensor& x_in,
                                                                const State& entry,
                                                                const torch::Tensor& mask) {
  // NOTE [ Lengths in a linear recurrence ] (linear_recurrence.h)
  const auto x = mask.defined() ? x_in.masked_fill(mask.logical_not().unsqueeze(2), 0)
                                : x_in;  // [Tb, B, I]
  auto c = coefficients(layer, x);       // a, b [Tb, S...]
  if (mask.defined()) {
    std::vector<int64_t> shape(size_t(c.a.dim()), 1);  // [Tb, B, 1, ...]
    shape[0] = mask.size(0);
    shape[1] = mask.size(1);
    const auto past_end = mask.logical_not().view(shape);
    c.a = c.a.masked_fill(past_end, 1);
    c.b = c.b.masked_fill(past_end, 0);
  }
  const auto h = linear_recurrence(form_, c.a, c.b, to_scan_state(entry));  // [Tb, S...]
  auto z = readout(layer, h, x, c);                                           // [Tb, B, H]
  if (mask.defined()) z = z.masked_fill(mask.logical_not().unsqueeze(2), 0);
  return {z, from_scan_state(h.select(0, h.size(0) - 1))};
}

}  // namespace vlrnn
