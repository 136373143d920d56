#include "vlrnn/core/state.h"

namespace vlrnn {

State State::detached() const {
  std::vector<torch::Tensor> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.detach());
  return State(std::move(out));
}

// NOTE [ Stored states are compact ]
// A model may return its exit state as a view of a larger tensor: a linear recurrence's is
// the last row of its block's scan output h [Tb, B, W], and a user's module may slice its
// output the same way. A view keeps its whole storage alive, so a method that stores one
// state per block boundary (VLRNN's no-grad pass) would keep every block's output, memory
// growing with T. Stored states are therefore copied into tensors of their own size when
// they are views of more (a [B, H] copy per block; nothing for the usual compact state).
// tests/measure/test_iteration_memory.cpp checks the peak stays flat in T for every kind.
State State::compacted() const {
  std::vector<torch::Tensor> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    const bool owns_just_itself =
        !t.defined() || (t.is_contiguous() && t.storage_offset() == 0 &&
                         t.storage().nbytes() == size_t(t.numel()) * t.element_size());
    out.push_back(owns_just_itself ? t : t.clone(at::MemoryFormat::Contiguous));
  }
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
