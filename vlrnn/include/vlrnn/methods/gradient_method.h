#pragma once
// The one interface every way of computing gradients implements (full BPTT, VLRNN,
// checkpointing, truncated BPTT, ...). The public compute() validates the workload, then
// calls the method's compute_impl(). It accumulates dL/dθ into the parameters' .grad()
// (and into h_0's, the inputs' and the targets' when they require grad) and returns the
// detached loss.

#include "vlrnn/core/loss.h"
#include "vlrnn/core/output_module.h"
#include "vlrnn/core/recurrent_module.h"
#include "vlrnn/core/sequence.h"
#include "vlrnn/core/state.h"

#include <string>

namespace vlrnn {

// One iteration's inputs: model, head, data, initial state and reduction.
struct Workload {
  RecurrentModule& model;
  OutputModule& head;
  SequenceBatch batch;
  State h0 = {};  // empty = zeros that require no grad
  Reduction reduction = Reduction::kMean;
  // dL/d(final state) from a later consumer of it (the next call on the same stream), shaped
  // like the state; empty = none. Every exact method back-propagates it with the loss, so a
  // stream cut into calls, each handing its h0's gradient to the one before, gets the
  // whole stream's gradients (NOTE [ Gradients across calls ]).
  State final_state_grad = {};
  // The gradients are those of loss_scale · L + <final_state_grad, final state>: a
  // mixed-precision loop's loss scale (NOTE [ Loss scale ]). The loss returned is L.
  double loss_scale = 1.0;
};

// How many steps each phase ran (summed over all blocks / segments).
struct StepCounters {
  int64_t forward_with_grad = 0;     // steps run with autograd recording
  int64_t forward_no_grad = 0;  // steps run under NoGradGuard (recomputation sources)
  int64_t backward = 0;              // steps back-propagated through
};

struct GradientResult {
  torch::Tensor loss;         // scalar, detached
  State final_state;          // state after each sequence's last step, detached
  torch::Tensor step_losses;  // [T, B] unweighted per-step losses, detached (0 past a length)
  // The same per-step losses packed like the input ([N]), when the batch came from
  // PackedSequences (SequenceBatch::from_packed).
  c10::optional<torch::nn::utils::rnn::PackedSequence> packed_step_losses;
  StepCounters counters;
};

class GradientMethod {
 public:
  // Probes oneDNN's LSTM once per process (NOTE [ oneDNN's LSTM inference, checked ] in
  // vlrnn/cells/onednn_lstm.h) when the first method is made, before any step is measured.
  GradientMethod();
  virtual ~GradientMethod() = default;

  // Validates `workload` (shapes, dtypes, state, targets) and computes the gradients.
  GradientResult compute(const Workload& workload);
  // NOTE [ Preparing is not the step ]: does, once and ahead of the iterations, what the
  // method measures about a workload (the planner's cost model), so that no measured step
  // pays for it. Drivers that measure steps call it first; compute() on a workload that was
  // not prepared prepares it itself, and that first step then includes the work.
  void prepare(const Workload& workload);

  virtual std::string name() const = 0;
  // The method with its options, e.g. "vlrnn(K=64)".
  virtual std::string describe() const { return name(); }
  // False for approximations (truncated BPTT): the verifier reports their error instead.
  virtual bool is_exact() const { return true; }

 protected:
  // `workload.h0` is filled in (zeros when absent) before these are called.
  virtual GradientResult compute_impl(const Workload& workload) = 0;
  virtual void prepare_impl(const Workload& workload) {}
};

// NOTE [ Gradients across calls ]
// A stream cut into calls: call j starts from call j - 1's final state, so the losses of the
// calls after it reach its parameters through that state. With a SUM loss the whole stream's
// gradient is, call by call, the gradient of the call's own loss plus <δ, final state>, δ
// being dL/dh0 of the next call. So the calls run forward, then last to first, each seeded
// with the next one's dL/dh0 as final_state_grad, give one whole-stream call's gradients
// exactly. Sequence b's final state is its state after its own last step (carried unchanged
// to T), so its seed reaches that step. A bidirectional model's final state is each layer's
// forward direction after its last step and backward direction after step 0: both parts
// are seeded. Truncated BPTT adds the seed to its last window only.

// NOTE [ Targets with a graph ]
// Targets may carry a graph: an encoder's output that the rnn learns to predict, trained with
// it. A method back-propagates the head block by block, and each block's backward would enter
// that graph apart: a node it shares (validated()'s masking of the padding, the caller's
// encoder) is passed a second time, which raises once its saved tensors are freed, and a hook
// upstream sees each block's part. So compute() gives the method the targets as a leaf, whose
// gradient gathers dL/dy over the blocks, and takes it into the caller's graph in one backward
// at the end, as one loss.backward() of full BPTT would. Inputs with a graph get a leaf too,
// taken back in the same backward: x and y may come from one encoder (next-step prediction
// in its space), which two backwards would pass twice.

// NOTE [ Loss scale ]
// Mixed-precision training in float16 multiplies the loss by a scale S before backward()
// (torch.amp.GradScaler), so that small gradients do not underflow on their way back, and
// divides the parameters' gradients by S before the step. The engine computes the gradients
// while it runs, so it is given S: head_loss() hooks each block's loss to multiply the
// gradient it receives by S, so every seed from the loss is scaled before any float16 op
// sees it, as (S · L).backward() would, and the loss returned stays L (scaling the step
// weights instead would report S · L, which overflows in float16 where L does not).
// final_state_grad is taken as given: in a stream cut into calls it is the next call's
// dL/dh0, which that call's own scale has already multiplied, as backward() takes a
// gradient it is handed.

// Throws an error naming the argument when `workload` is inconsistent; returns it with
// h0 filled in with zeros when it was absent.
Workload validated(const Workload& workload);

}  // namespace vlrnn
