#include "vlrnn/schedule/schedule_method.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"

#include <map>

namespace vlrnn::schedule {
namespace {

// A stored state and the generators at it (NOTE [ RNG across the no-grad pass ]).
struct Stored {
  State state;
  RngState rng;
};

// A forward_grad range waiting for its backward: its entry (leaves whose .grad() becomes
// δh at its start), its inputs (a leaf when dL/dx is wanted) and its two roots.
struct Tape {
  int64_t end = 0;
  State entry;
  torch::Tensor inputs;  // [n, B, F]
  BlockForward block;
};

}  // namespace

GradientResult execute_schedule(const Schedule& schedule, const Workload& workload) {
  const auto& inputs = workload.batch.inputs;  // [T, B, F]
  const int64_t T = workload.batch.time_steps();
  TORCH_CHECK(schedule.time_steps == T, "schedule ", schedule.name, ": made for T = ",
              schedule.time_steps, " steps, but the batch has T = ", T);
  schedule.validate();

  GradientResult result;
  result.step_losses = torch::zeros({T, workload.batch.batch_size()},
                                    inputs.options().requires_grad(false));  // [T, B]
  auto loss = torch::zeros({}, inputs.options().requires_grad(false));
  const bool want_input_grad = inputs.requires_grad();
  torch::Tensor input_grad;  // [T, B, F]
  if (want_input_grad) input_grad = torch::zeros_like(inputs, torch::MemoryFormat::Contiguous);

  std::map<int64_t, Stored> stored;
  stored[0] = {workload.h0, RngState::capture(inputs.device())};
  std::map<int64_t, Tape> tapes;
  State delta;  // δh at the start of the last back-propagated range; empty at T
  RngState after_forward;  // where one forward pass leaves the generators
  bool reached_end = false;
  const auto note_end = [&](const State& final_state) {
    if (reached_end) return;
    reached_end = true;
    result.final_state = final_state.detached();
    after_forward = RngState::capture(inputs.device());
  };

  for (const Op& op : schedule.ops) {
    const int64_t a = op.begin, b = op.end, n = op.end - op.begin;
    switch (op.kind) {
      case OpKind::kForwardNoGrad: {
        const Stored& from = stored.at(a);
        from.rng.restore();  // re-running from a stored state draws what the first pass drew
        State h = from.state;
        for (int64_t t0 = a; t0 < b; t0 += kAdvanceChunk) {  // NOTE [ Chunked advance ]
          h = forward_no_grad(workload, t0, std::min(kAdvanceChunk, b - t0), h);
        }
        result.counters.forward_no_grad += n;
        if (b == T) note_end(h);
        stored[b] = {std::move(h), RngState::capture(inputs.device())};
        break;
      }
      case OpKind::kForwardGrad: {
        const Stored& from = stored.at(a);
        from.rng.restore();
        Tape tape;
        tape.end = b;
        // Step 0 starts from the caller's h0 so its gradient lands where autograd would put
        // it; later ranges start from detached leaves whose .grad() is δh.
        tape.entry = a == 0 ? workload.h0 : from.state.detached_leaves();
        tape.inputs = inputs.narrow(0, a, n);  // [n, B, F]
        if (want_input_grad) tape.inputs = tape.inputs.detach().requires_grad_(true);
        tape.block = forward_block(workload, tape.inputs, a, n, tape.entry);
        result.counters.forward_with_grad += n;
        loss += tape.block.loss.detach();
        result.step_losses.narrow(0, a, n).copy_(tape.block.step_losses);
        if (b == T) note_end(tape.block.exit);
        tapes[a] = std::move(tape);
        break;
      }
      case OpKind::kBackward: {
        auto it = tapes.find(a);
        Tape& tape = it->second;
        backward_block(tape.block, delta);
        result.counters.backward += n;
        std::vector<torch::Tensor> entry_grads;  // δh at a
        if (a > 0) {
          for (const auto& h : tape.entry) entry_grads.push_back(h.grad());
        }
        delta = State(std::move(entry_grads));
        // NOTE [ Steps no sequence reaches ]: when every sequence ends before a (a batch
        // padded to a bucket length), the range's inputs feed nothing and get no gradient;
        // their slice of dL/dx stays zero, as in full BPTT.
        if (want_input_grad && tape.inputs.grad().defined()) {
          input_grad.narrow(0, a, n).copy_(tape.inputs.grad());
        }
        tapes.erase(it);
        break;
      }
      case OpKind::kFree:
        stored.erase(a);
        break;
    }
  }
  stored.clear();
  after_forward.restore();
  if (want_input_grad) accumulate_input_grad(inputs, input_grad);
  result.loss = loss;
  return result;
}

ScheduleMethod::ScheduleMethod(std::string name, std::string description, Scheduler scheduler)
    : name_(std::move(name)), description_(std::move(description)),
      scheduler_(std::move(scheduler)) {
  TORCH_CHECK(scheduler_, "ScheduleMethod ", name_, ": expected a scheduler, got none");
}

GradientResult ScheduleMethod::compute_impl(const Workload& workload) {
  return execute_schedule(scheduler_(workload), workload);
}

}  // namespace vlrnn::schedule
