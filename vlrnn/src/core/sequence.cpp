#include "vlrnn/core/sequence.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {

SequenceBatch SequenceBatch::slice(int64_t t0, int64_t n) const {
  SequenceBatch block;
  block.inputs = inputs.narrow(0, t0, n);    // [n, B, F]
  block.targets = targets.narrow(0, t0, n);  // [n, B(, O)]
  if (lengths.defined()) {
    block.lengths = (lengths - t0).clamp(0, n);  // [B]
  }
  if (resets.defined()) block.resets = resets.narrow(0, t0, n);  // [n, B]
  return block;
}

torch::Tensor resets_from_segment_starts(const std::vector<std::vector<int64_t>>& segment_starts,
                                         int64_t time_steps) {
  auto resets = torch::zeros({time_steps, int64_t(segment_starts.size())}, torch::kBool);
  auto mask = resets.accessor<bool, 2>();
  for (size_t b = 0; b < segment_starts.size(); ++b) {
    for (int64_t t : segment_starts[b]) {
      TORCH_CHECK(t >= 0 && t <= time_steps, "segment_starts[", b, "]: expected steps in [0, T = ",
                  time_steps, "], got ", t);
      if (t < time_steps) mask[t][int64_t(b)] = true;
    }
  }
  return resets;
}

namespace {

// "[3, 3, 2, 1]" for a PackedSequence's batch sizes.
std::string describe_batch_sizes(const torch::Tensor& batch_sizes) {
  if (!batch_sizes.defined()) return "none";
  auto sizes = batch_sizes.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<int64_t> values(sizes.data_ptr<int64_t>(), sizes.data_ptr<int64_t>() + sizes.numel());
  return fmt::format("[{}]", fmt::join(values, ", "));
}

}  // namespace

SequenceBatch SequenceBatch::from_packed_sequences(
    const torch::nn::utils::rnn::PackedSequence& inputs,
    const torch::nn::utils::rnn::PackedSequence& targets) {
  namespace rnn_utils = torch::nn::utils::rnn;
  TORCH_CHECK(inputs.data().defined() && inputs.data().dim() == 2,
              "inputs (PackedSequence): expected packed data of shape [N, F], got ",
              inputs.data().defined() ? inputs.data().sizes().vec() : std::vector<int64_t>{});
  TORCH_CHECK(targets.data().defined() && targets.data().size(0) == inputs.data().size(0) &&
                  torch::equal(targets.batch_sizes(), inputs.batch_sizes()),
              "targets (PackedSequence): expected the same sequence lengths as the inputs "
              "(batch_sizes ", describe_batch_sizes(inputs.batch_sizes()), "), got batch_sizes ",
              describe_batch_sizes(targets.batch_sizes()));
  const bool same_order =
      (!inputs.sorted_indices().defined() && !targets.sorted_indices().defined()) ||
      (inputs.sorted_indices().defined() && targets.sorted_indices().defined() &&
       torch::equal(inputs.sorted_indices(), targets.sorted_indices()));
  TORCH_CHECK(same_order, "targets (PackedSequence): expected the same sequence order as the "
              "inputs (sorted_indices differ); pack both with the same lengths");
  SequenceBatch batch;
  auto [padded_inputs, lengths] = rnn_utils::pad_packed_sequence(inputs);  // [T, B, F], [B]
  batch.inputs = padded_inputs;
  batch.targets = std::get<0>(rnn_utils::pad_packed_sequence(targets));   // [T, B(, O)]
  batch.lengths = lengths.to(torch::kLong);
  batch.from_packed = true;
  return batch;
}

}  // namespace vlrnn
