#pragma once
// A time-major batch of sequences and their targets.
// Shapes (see vlrnn/core/shapes.h): inputs [T, B, F], targets [T, B] or [T, B, O], lengths [B],
// resets [T, B].

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
  // NOTE [ Resets ]: [T, B] bool; true at (t, b) when a new segment of sequence b starts at
  // step t (an episode or a document packed after the previous one): the state entering
  // step t is then the initial state (h0's row b, or zeros), as if a new sequence began
  // there, and no gradient crosses the boundary. Undefined = none. A reset at step 0 or past
  // a sequence's end changes nothing. Methods never see it: run_model() (methods/block.h)
  // applies it, so every method and every model is exact with resets; a bidirectional
  // model's directions apply it too, the backward one at each segment's end
  // (Bidirectional::restarts()).
  torch::Tensor resets;
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
  bool has_resets() const { return resets.defined(); }

  // The steps [t0, t0 + n) of every tensor; lengths become the valid steps inside the range
  // (0 for a sequence that has already ended).
  SequenceBatch slice(int64_t t0, int64_t n) const;
};

// The [T, B] reset mask of segment starts given per sequence in the cu_seqlens style:
// segment_starts[b] holds the steps where sequence b's segments start (offsets into its
// packed stream, any order; 0 and T allowed and meaningless). Throws naming
// "segment_starts" for a step outside [0, T].
torch::Tensor resets_from_segment_starts(const std::vector<std::vector<int64_t>>& segment_starts,
                                         int64_t time_steps);

}  // namespace vlrnn
