#include "vlrnn/baselines/full_bptt.h"

#include "vlrnn/methods/block.h"

namespace vlrnn {

GradientResult FullBptt::compute_impl(const Workload& workload) {
  const int64_t steps = workload.batch.time_steps();
  // All T steps in one block: every activation of every step stays alive until backward.
  const BlockForward all = forward_block(workload, workload.batch.inputs, 0, steps, workload.h0);
  backward_block(all, workload.final_state_grad);  // NOTE [ Gradients across calls ]

  GradientResult result;
  result.loss = all.loss.detach();
  result.final_state = all.exit.detached();
  result.step_losses = all.step_losses;
  result.counters = {steps, 0, steps};
  return result;
}

}  // namespace vlrnn
