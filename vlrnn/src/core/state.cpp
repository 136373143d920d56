#include "vlrnn/core/state.h"

namespace vlrnn {

State State::detached() const {
  std::vector<torch::Tensor> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.detach());
  return State(std::move(out));
}

State State::detached_leaves() const {
  std::vector<torch::Tensor> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.detach().requires_grad_(true));
  return State(std::move(out));
}

bool State::requires_grad() const {
  for (const auto& t : tensors_) {
    if (t.requires_grad()) return true;
  }
  return false;
}

std::vector<int64_t> StateSpec::shape_for_batch(int64_t batch) const {
  auto out = shape;
  out.at(batch_dim) = batch;
  return out;
}

}  // namespace vlrnn
