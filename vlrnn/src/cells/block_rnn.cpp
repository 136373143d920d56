#include "vlrnn/cells/block_rnn.h"

#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/core/layer_stack.h"

#include <cmath>

// Shape legend: Tb = steps, B = batch, F = input features, H = hidden, L = layers,
// G = gates per cell.

namespace vlrnn {

void check_layer_weights(const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                         const torch::Tensor& b_ih, const torch::Tensor& b_hh, int64_t gates,
                         const std::string& argument) {
  TORCH_CHECK(w_ih.defined() && w_hh.defined() && b_ih.defined() && b_hh.defined(), argument,
              ": expected the four tensors w_ih, w_hh, b_ih, b_hh, got an undefined one");
  TORCH_CHECK(w_hh.dim() == 2 && w_hh.size(0) == gates * w_hh.size(1), argument,
              ".w_hh: expected shape [", gates, "H, H], got ", w_hh.sizes());
  const int64_t hidden = w_hh.size(1);
  TORCH_CHECK(w_ih.dim() == 2 && w_ih.size(0) == gates * hidden, argument, ".w_ih: expected shape [",
              gates, "H, F] = [", gates * hidden, ", F], got ", w_ih.sizes());
  TORCH_CHECK(b_ih.sizes() == torch::IntArrayRef{gates * hidden}, argument, ".b_ih: expected shape [",
              gates, "H] = [", gates * hidden, "], got ", b_ih.sizes());
  TORCH_CHECK(b_hh.sizes() == torch::IntArrayRef{gates * hidden}, argument, ".b_hh: expected shape [",
              gates, "H] = [", gates * hidden, "], got ", b_hh.sizes());
  for (const auto* t : {&w_hh, &b_ih, &b_hh}) {
    TORCH_CHECK(t->scalar_type() == w_ih.scalar_type() && t->device() == w_ih.device(),
                argument, ": expected all four tensors with w_ih's dtype ", w_ih.scalar_type(),
                " on ", w_ih.device(), ", got one with ", t->scalar_type(), " on ", t->device());
  }
}

BlockRnn::BlockRnn(const std::string& cell, int64_t gates, std::vector<std::string> state_names,
                   int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout)
    : gates_(gates),
      state_names_(std::move(state_names)),
      input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      dropout_(dropout) {
  check_stack_config(input_size, hidden_size, num_layers, dropout);
  // The built-in models' names and order (block_rnn.h); initialised as LibTorch's
  // reset_parameters does: every tensor uniform(-1/sqrt(H), 1/sqrt(H)), in registration order.
  const bool one_module_per_layer = dropout > 0.0 && num_layers > 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  std::shared_ptr<torch::nn::Module> holder;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (one_module_per_layer || l == 0) {
      holder = std::make_shared<torch::nn::Module>();
      if (one_module_per_layer) {
        auto layer = register_module("layer" + std::to_string(l), std::make_shared<torch::nn::Module>());
        layer->register_module(cell, holder);
      } else {
        register_module(cell, holder);
      }
    }
    const std::string suffix = "_l" + std::to_string(one_module_per_layer ? 0 : l);
    const int64_t in = l == 0 ? input_size : hidden_size;
    std::vector<torch::Tensor> p{
        holder->register_parameter("weight_ih" + suffix, torch::empty({gates * hidden_size, in})),
        holder->register_parameter("weight_hh" + suffix, torch::empty({gates * hidden_size, hidden_size})),
        holder->register_parameter("bias_ih" + suffix, torch::empty({gates * hidden_size})),
        holder->register_parameter("bias_hh" + suffix, torch::empty({gates * hidden_size}))};
    torch::NoGradGuard no_grad;
    for (auto& t : p) t.uniform_(-bound, bound);
    layers_.push_back(std::move(p));
  }
}

BlockRnn::BlockRnn(int64_t gates, std::vector<std::string> state_names,
                   const std::vector<std::vector<torch::Tensor>>& layers, double dropout)
    : gates_(gates), state_names_(std::move(state_names)), dropout_(dropout) {
  TORCH_CHECK(!layers.empty(), "layers: expected at least one layer's tensors, got none");
  const size_t per_layer = layers[0].size();
  TORCH_CHECK(per_layer == 4 || per_layer == 2, "layers[0]: expected (w_ih, w_hh, b_ih, b_hh) "
              "or (w_ih, w_hh), got ", per_layer, " tensors");
  num_layers_ = static_cast<int64_t>(layers.size());
  const char* names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  for (int64_t l = 0; l < num_layers_; ++l) {
    const std::string argument = "layers[" + std::to_string(l) + "]";
    TORCH_CHECK(layers[l].size() == per_layer, argument, ": expected ", per_layer,
                " tensors, as layers[0], got ", layers[l].size());
    std::vector<torch::Tensor> p = layers[l];
    for (size_t i = p.size(); i < 4; ++i) {
      p.push_back(p[0].defined() && p[0].dim() > 0 ? torch::zeros({p[0].size(0)}, p[0].options())
                                                   : torch::Tensor());
    }
    check_layer_weights(p[0], p[1], p[2], p[3], gates, argument);
    if (l == 0) {
      input_size_ = p[0].size(1);
      hidden_size_ = p[1].size(1);
    }
    const int64_t width = l == 0 ? input_size_ : hidden_size_;
    TORCH_CHECK(p[1].size(1) == hidden_size_ && p[0].size(1) == width, argument,
                ": expected w_ih [", gates * hidden_size_, ", ", width, "] and w_hh [",
                gates * hidden_size_, ", ", hidden_size_, "], got ", p[0].sizes(), " and ",
                p[1].sizes());
    for (size_t i = 0; i < per_layer; ++i) {
      // requires_grad as the owner set it: register_parameter would switch a frozen one on.
      register_parameter(names[i] + ("_l" + std::to_string(l)), p[i], p[i].requires_grad());
    }
    layers_.push_back(std::move(p));
  }
  check_stack_config(input_size_, hidden_size_, num_layers_, dropout);
}

std::vector<StateSpec> BlockRnn::state_spec() const {
  std::vector<StateSpec> specs;
  for (const auto& name : state_names_) specs.push_back({name, {num_layers_, -1, hidden_size_}, 1});
  return specs;
}

const std::vector<torch::Tensor>& BlockRnn::layer_parameters(int64_t layer) const {
  TORCH_CHECK(layer >= 0 && layer < num_layers_, "layer: expected in [0, ", num_layers_,
              "), got ", layer);
  return layers_[layer];
}

std::pair<torch::Tensor, State> BlockRnn::forward(const torch::Tensor& x_block,
                                                  const State& h_entry,
                                                  const torch::Tensor& lengths) {
  // x_block [Tb, B, F]; h_entry S x [L, B, H]; lengths [B] -> z [Tb, B, H], S x [L, B, H]
  check_block_input(x_block);
  const auto masks = layer_dropout_masks(is_training(), x_block.size(0), num_layers_,
                                         x_block.size(1), hidden_size_, dropout_,
                                         x_block.options());  // [Tb, L-1, B, H]
  return forward_with_masks(x_block, h_entry, lengths, masks);
}

void BlockRnn::check_block_input(const torch::Tensor& x_block) const {
  TORCH_CHECK(x_block.defined() && x_block.dim() == 3 && x_block.size(2) == input_size_,
              "x_block: expected shape [Tb, B, F] with F = ", input_size_, ", got ",
              x_block.defined() ? x_block.sizes() : torch::IntArrayRef{});
}

std::pair<torch::Tensor, State> BlockRnn::forward_with_masks(const torch::Tensor& x_block,
                                                             const State& h_entry,
                                                             const torch::Tensor& lengths,
                                                             const torch::Tensor& masks) {
  check_block_input(x_block);
  const int64_t steps = x_block.size(0), batch = x_block.size(1);
  TORCH_CHECK(h_entry.size() == state_names_.size(), "h_entry: expected a state of ",
              state_names_.size(), " tensor(s), got ", h_entry.size());
  for (size_t i = 0; i < h_entry.size(); ++i) {
    TORCH_CHECK(h_entry[i].defined() &&
                    h_entry[i].sizes() == torch::IntArrayRef({num_layers_, batch, hidden_size_}),
                "h_entry (", state_names_[i], "): expected shape [L, B, H] = [", num_layers_,
                ", ", batch, ", ", hidden_size_, "], got ",
                h_entry[i].defined() ? h_entry[i].sizes() : torch::IntArrayRef{});
  }
  TORCH_CHECK(!masks.defined() ||
                  masks.sizes() == torch::IntArrayRef({steps, num_layers_ - 1, batch, hidden_size_}),
              "masks: expected shape [Tb, L-1, B, H] = [", steps, ", ", num_layers_ - 1, ", ",
              batch, ", ", hidden_size_, "], got ", masks.defined() ? masks.sizes() : torch::IntArrayRef{});
  // [Tb, B] bool; undefined when every sequence fills the block
  const auto mask = block_step_mask(lengths, batch, steps, x_block.device());
  return forward_layer_stack(x_block, h_entry, num_layers_, masks,
                             [&](int64_t l, const torch::Tensor& input, const State& entry) {
                               return forward_layer(l, input, entry, mask);
                             });
}

void BlockRnn::copy_layers_from(const torch::nn::Module& source, int64_t source_layers,
                                int64_t source_input, int64_t source_hidden, bool bidirectional,
                                bool bias, const std::string& argument) {
  TORCH_CHECK(source_layers == num_layers_, argument, ": expected num_layers = ", num_layers_,
              " (this model's), got num_layers = ", source_layers);
  TORCH_CHECK(!bidirectional, argument, ": expected a unidirectional module, got bidirectional = true");
  TORCH_CHECK(bias, argument, ": expected a module with biases, got bias = false");
  TORCH_CHECK(source_input == input_size_ && source_hidden == hidden_size_, argument,
              ": expected input_size ", input_size_, " and hidden_size ", hidden_size_,
              " (this model's), got ", source_input, " and ", source_hidden);
  const auto params = source.named_parameters(/*recurse=*/false);
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < num_layers_; ++l) {
    const std::string suffix = "_l" + std::to_string(l);
    const char* names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (size_t i = 0; i < 4; ++i) layers_[l][i].copy_(params[names[i] + suffix]);
  }
}

}  // namespace vlrnn
