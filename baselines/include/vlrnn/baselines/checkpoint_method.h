#pragma once
// Checkpointed BPTT as a user of torch.utils.checkpoint would write it: the sequence cut
// into S segments, each run through checkpoint() (vlrnn/baselines/checkpoint_function.h).
// The forward pass keeps only each segment's entry state (and, with the head outside, every
// step's model outputs z); the backward pass recomputes each segment once, last to first.

#include "vlrnn/methods/gradient_method.h"

namespace vlrnn {

struct CheckpointOptions {
  // S: number of segments; 0 = ceil(sqrt(T)). More than T is clamped to T.
  int64_t segments = 0;
  // Inside (default): the head and loss run inside each segment, so only segment-boundary
  // states and scalar losses are kept. Outside: the segments return z [Tb, B, Z] and the
  // head runs outside them, so z and the head's activations for all T steps stay alive
  // (what a naive user of checkpoint gets).
  bool head_inside = true;

  CheckpointOptions& with_segments(int64_t s) { segments = s; return *this; }
};

class CheckpointMethod : public GradientMethod {
 public:
  explicit CheckpointMethod(CheckpointOptions options = {});
  std::string name() const override { return "checkpoint"; }
  std::string describe() const override;
  int64_t segments_for(int64_t time_steps) const;

 protected:
  GradientResult compute_impl(const Workload& workload) override;

 private:
  CheckpointOptions options_;
};

}  // namespace vlrnn
