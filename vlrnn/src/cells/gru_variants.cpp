#include "vlrnn/cells/gru_variants.h"

#include "vlrnn/cells/gru_block.h"

#include <cmath>

namespace vlrnn {

BlockGru::BlockGru(GruVariant variant, int64_t input_size, int64_t hidden_size)
    : variant_(variant), input_size_(input_size), hidden_size_(hidden_size) {
  TORCH_CHECK(input_size > 0, "input_size: expected > 0, got ", input_size);
  TORCH_CHECK(hidden_size > 0, "hidden_size: expected > 0, got ", hidden_size);
  weight_ih_ = register_parameter("weight_ih", torch::empty({3 * hidden_size, input_size}));
  weight_hh_ = register_parameter("weight_hh", torch::empty({3 * hidden_size, hidden_size}));
  bias_ih_ = register_parameter("bias_ih", torch::empty({3 * hidden_size}));
  bias_hh_ = register_parameter("bias_hh", torch::empty({3 * hidden_size}));
  // As torch::nn::GRU::reset_parameters: every tensor uniform(-1/sqrt(H), 1/sqrt(H)).
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) p.uniform_(-bound, bound);
}

std::vector<StateSpec> BlockGru::state_spec() const { return {{"h", {1, -1, hidden_size_}, 1}}; }

std::string BlockGru::describe() const {
  return RecurrentModule::describe() + " variant=" + to_string(variant_);
}

std::pair<torch::Tensor, State> BlockGru::forward(const torch::Tensor& x_block,
                                                  const State& h_entry,
                                                  const torch::Tensor& lengths) {
  // x_block [Tb, B, F]; h_entry (h [1, B, H]); lengths [B] -> z [Tb, B, H], (h [1, B, H])
  TORCH_CHECK(x_block.defined() && x_block.dim() == 3 && x_block.size(2) == input_size_,
              "x_block: expected shape [Tb, B, F] with F = ", input_size_, ", got ",
              x_block.defined() ? x_block.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(h_entry.size() == 1, "h_entry: expected a state of 1 tensor (h), got ",
              h_entry.size());
  const int64_t steps = x_block.size(0), batch = x_block.size(1);
  torch::Tensor mask;  // [Tb, B] bool; undefined when every sequence fills the block
  if (lengths.defined() && batch > 0) {
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch,
                "lengths: expected shape [B] = [", batch, "], got ", lengths.sizes());
    const auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong);
    const int64_t shortest = lengths_cpu.min().item<int64_t>();
    const int64_t longest = lengths_cpu.max().item<int64_t>();
    TORCH_CHECK(shortest >= 0 && longest <= steps, "lengths: expected values in [0, Tb] = [0, ",
                steps, "], got values in [", shortest, ", ", longest, "]");
    if (shortest < steps) mask = step_mask(lengths_cpu, steps, x_block.device());
  }
  auto [z, h] = gru_block(variant_, x_block, h_entry[0], weights(), mask);
  return {z, State{h}};
}

void BlockGru::copy_weights_from(const torch::nn::GRU& gru) {
  const auto& o = gru->options;
  TORCH_CHECK(o.num_layers() == 1, "gru: expected a one-layer torch::nn::GRU, got num_layers = ",
              o.num_layers());
  TORCH_CHECK(!o.bidirectional(), "gru: expected a unidirectional GRU, got bidirectional = true");
  TORCH_CHECK(o.bias(), "gru: expected a GRU with biases, got bias = false");
  TORCH_CHECK(o.input_size() == input_size_ && o.hidden_size() == hidden_size_,
              "gru: expected input_size ", input_size_, " and hidden_size ", hidden_size_,
              " (this BlockGru's), got ", o.input_size(), " and ", o.hidden_size());
  const auto params = gru->named_parameters(/*recurse=*/false);
  torch::NoGradGuard no_grad;
  weight_ih_.copy_(params["weight_ih_l0"]);
  weight_hh_.copy_(params["weight_hh_l0"]);
  bias_ih_.copy_(params["bias_ih_l0"]);
  bias_hh_.copy_(params["bias_hh_l0"]);
}

}  // namespace vlrnn
