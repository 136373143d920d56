#include "vlrnn/core/recurrent_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {

std::string RecurrentModule::describe() const {
  std::string out = name();
  for (const auto& p : named_parameters()) {
    out += fmt::format(" {}[{}]", p.key(), fmt::join(p.value().sizes(), ","));
  }
  return out;
}

State RecurrentModule::initial_state(int64_t batch, const torch::TensorOptions& options) const {
  std::vector<torch::Tensor> tensors;
  for (const auto& spec : state_spec()) {
    tensors.push_back(torch::zeros(spec.shape_for_batch(batch), options));
  }
  return State(std::move(tensors));
}

void RecurrentModule::check_state(const State& state, int64_t batch, torch::ScalarType dtype,
                                  const std::string& argument) const {
  const auto specs = state_spec();
  std::vector<std::string> names;
  for (const auto& spec : specs) names.push_back(spec.name);
  TORCH_CHECK(state.size() == specs.size(), argument, ": expected a state of ", specs.size(),
              " tensors (", fmt::format("{}", fmt::join(names, ", ")), "), got ", state.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& tensor = state[i];
    const auto expected = specs[i].shape_for_batch(batch);
    TORCH_CHECK(tensor.defined(), argument, "[", i, "] (", specs[i].name,
                "): expected a tensor of shape ", fmt::format("[{}]", fmt::join(expected, ", ")),
                ", got an undefined tensor");
    TORCH_CHECK(tensor.sizes().vec() == expected, argument, "[", i, "] (", specs[i].name,
                "): expected shape ", fmt::format("[{}]", fmt::join(expected, ", ")),
                " (batch size ", batch, " at dim ", specs[i].batch_dim, "), got ",
                fmt::format("[{}]", fmt::join(tensor.sizes().vec(), ", ")));
    TORCH_CHECK(tensor.scalar_type() == dtype, argument, "[", i, "] (", specs[i].name,
                "): expected dtype ", dtype, " (the inputs' dtype), got ", tensor.scalar_type());
  }
}

}  // namespace vlrnn
