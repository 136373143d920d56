#pragma once
// A time-major batch of sequences and their targets.
// Shapes (see vlrnn/core/shapes.h): inputs [T, B, F], targets [T, B] or [T, B, O], lengths [B].

#include <torch/torch.h>

namespace vlrnn {

// Variable lengths: sequence b has lengths[b] valid steps (any order, 1 <= len <= T); the
// steps beyond do not exist — they carry no loss and no gradient, and the sequence's state
// stays frozen at its last valid step. Padded values there may be anything.
struct SequenceBatch {
  torch::Tensor inputs;   // [T, B, F] floating point; may require grad
  torch::Tensor targets;  // [T, B] (class indices) or [T, B, O] (regression values)
  // [B] int64 valid steps of each sequence; undefined = every sequence has all T steps.
  torch::Tensor lengths;
  // True when the batch was made from PackedSequences: per-step results are then also
  // returned packed (GradientResult::packed_step_losses).
  bool from_packed = false;

  // A padded batch from LibTorch PackedSequences of inputs ([N, F]) and targets ([N] or
  // [N, O]) packed with the same lengths; sequences keep their original (unsorted) order.
  static SequenceBatch from_packed_sequences(
      const torch::nn::utils::rnn::PackedSequence& inputs,
      const torch::nn::utils::rnn::PackedSequence& targets);

  int64_t time_steps() const { return inputs.size(0); }
  int64_t batch_size() const { return inputs.size(1); }
  bool has_lengths() const { return lengths.defined(); }

  // The steps [t0, t0 + n) of every tensor; lengths become the valid steps inside the range
  // (0 for a sequence that has already ended).
  SequenceBatch slice(int64_t t0, int64_t n) const;
};

}  // namespace vlrnn
