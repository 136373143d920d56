#pragma once
// The recurrent state carried from step to step: a tuple of tensors, e.g. (h) for a GRU,
// (h, c) for an LSTM, or the concatenation of several models' states for a composite.

#include <torch/torch.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace vlrnn {

class State {
 public:
  State() = default;
  explicit State(std::vector<torch::Tensor> tensors) : tensors_(std::move(tensors)) {}
  State(std::initializer_list<torch::Tensor> tensors) : tensors_(tensors) {}

  size_t size() const { return tensors_.size(); }
  bool empty() const { return tensors_.empty(); }
  const torch::Tensor& operator[](size_t i) const { return tensors_.at(i); }
  torch::Tensor& operator[](size_t i) { return tensors_.at(i); }
  const std::vector<torch::Tensor>& tensors() const { return tensors_; }
  auto begin() const { return tensors_.begin(); }
  auto end() const { return tensors_.end(); }

  // A copy cut from any autograd graph.
  State detached() const;
  // The same values, each tensor owning just its own bytes (NOTE [ Stored states are
  // compact ]): what a method keeps past the call that made it.
  State compacted() const;
  // Detached leaves that require grad: a block's entry point during VLRNN's backward.
  State detached_leaves() const;
  // True when any tensor requires grad.
  bool requires_grad() const;

 private:
  std::vector<torch::Tensor> tensors_;
};

// How one state tensor is shaped: `shape` with the batch dimension at `batch_dim`
// (its entry in `shape` is ignored; the batch size fills it).
struct StateSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t batch_dim = 0;

  std::vector<int64_t> shape_for_batch(int64_t batch) const;
};

}  // namespace vlrnn
