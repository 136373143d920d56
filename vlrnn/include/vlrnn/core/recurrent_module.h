#pragma once
// The interface every recurrent model implements: strictly sequential processing of a block
// of steps from an entry state. Shapes: x_block [Tb, B, F] -> z_block [Tb, B, Z].
//
// NOTE [ The RecurrentModule contract ]
// Block methods (VLRNN, checkpointing, the schedules) cut a sequence into blocks anywhere
// and run some blocks twice; they are exact only when the model computes the same function
// wherever the cuts fall:
// - Strictly sequential: step t depends on steps < t only through the state; forward() gets
//   no block offset.
// - Lengths: past its end a sequence keeps its state and emits zeros, and its padded inputs
//   (anything, nan included) never reach a valid result: select (torch::where, or pack).
// - Random draws (dropout): one step at a time, in step order, for the whole batch. The
//   methods restore the generators at a block's entry (NOTE [ RNG across the no-grad pass ]
//   in rng.h), which replays per-step draws only; a mask drawn once per forward() call fails
//   `vlrnn verify`. examples/indrnn.h is a user's cell that follows the contract.

#include "vlrnn/core/state.h"

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace vlrnn {

class RecurrentModule : public torch::nn::Module {
 public:
  // Runs the steps of x_block from h_entry: returns (z_block [Tb, B, Z], h_exit).
  // `lengths` ([B] int64, optional) gives each sequence's valid steps inside the block:
  // z is zero beyond them and h_exit is the state after a sequence's last valid step
  // (h_entry itself for a sequence with 0 valid steps).
  virtual std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block,
                                                  const State& h_entry,
                                                  const torch::Tensor& lengths = {}) = 0;

  virtual int64_t input_size() const = 0;   // F
  virtual int64_t output_size() const = 0;  // Z
  virtual std::vector<StateSpec> state_spec() const = 0;

  // Whether forward() may read an input past a sequence's end. A model that never does
  // (LibTorch's packed modules pack those steps away) says false, and is handed the batch's
  // inputs as they are instead of a zero-filled copy (NOTE [ Padding never reaches the
  // model ] in vlrnn/methods/block.h). The safe default is true.
  virtual bool reads_padding() const { return true; }

  // What tells this model apart from another with the same parameter shapes but different
  // costs (caches of measured costs are keyed by it). The default: the class and every
  // parameter's name and shape; a module whose behaviour depends on more (a variant, an
  // option) adds it.
  virtual std::string describe() const;

  // The zero state for a batch of `batch` sequences (what "h_0 absent" means).
  State initial_state(int64_t batch, const torch::TensorOptions& options) const;
  // Throws naming `argument` when `state` does not match state_spec() for this batch.
  void check_state(const State& state, int64_t batch, torch::ScalarType dtype,
                   const std::string& argument) const;
};

}  // namespace vlrnn
