#include "vlrnn/schedule/schedule_method.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/methods/progress.h"

#include <map>
#include <optional>

namespace vlrnn::schedule {
namespace {

// A stored state and the generators at it (NOTE [ RNG across the no-grad pass ]).
struct Stored {
  State state;
  RngState rng;
};

// The per-step losses [T, B], filled tape by tape.
torch::Tensor step_loss_buffer(const Workload& workload) {
  return torch::zeros({workload.batch.time_steps(), workload.batch.batch_size()},
                      workload.batch.inputs.options().requires_grad(false));
}

// A forward_grad range waiting for its backward: its entry (leaves whose .grad() becomes
// δh at its start), its inputs (a leaf when dL/dx is wanted) and its two roots.
struct Tape {
  int64_t end = 0;
  State entry;
  torch::Tensor inputs;  // [n, B, F]
  BlockForward block;
  // When a later forward op starts from this tape's end (NOTE [ Kept tapes ]): its exit
  // state, detached (sharing the graph's storage), and the generators at its end.
  std::optional<Stored> exit;
};

// The executor's state while it runs one schedule: what is stored, what is taped, δh, and the
// result being filled. One member function per op kind.
class Executor {
 public:
  Executor(const Schedule& schedule, const Workload& workload)
      : workload_(workload), inputs_(workload.batch.inputs), T_(workload.batch.time_steps()),
        want_input_grad_(inputs_.requires_grad()) {
    TORCH_CHECK(schedule.time_steps == T_, "schedule ", schedule.name, ": made for T = ",
                schedule.time_steps, " steps, but the batch has T = ", T_);
    const ScheduleCounts counts = schedule.validate();
    if (auto* sink = progress_sink()) {  // NOTE [ Progress of a long call ]
      sink->planned(schedule.name, T_, counts.forward_no_grad_steps + counts.forward_grad_steps);
    }
    kept_exits_ = kept_tape_exits(schedule);
    result_.step_losses = step_loss_buffer(workload);
    loss_ = torch::zeros({}, inputs_.options().requires_grad(false));
    if (want_input_grad_) input_grad_ = torch::zeros_like(inputs_, torch::MemoryFormat::Contiguous);
    stored_[0] = {workload.h0, RngState::capture(inputs_.device())};
    delta_ = workload.final_state_grad;  // δh_T: NOTE [ Gradients across calls ]
  }

  void run(const Op& op) {
    switch (op.kind) {
      case OpKind::kForwardNoGrad: forward_no_grad_op(op.begin, op.end); break;
      case OpKind::kForwardGrad: forward_grad_op(op.begin, op.end); break;
      case OpKind::kBackward: backward_op(op.begin, op.end); break;
      case OpKind::kFree: stored_.erase(op.begin); break;
    }
  }

  GradientResult finish() {
    stored_.clear();
    after_forward_.restore();
    if (want_input_grad_) accumulate_input_grad(inputs_, input_grad_);
    result_.loss = loss_;
    return std::move(result_);
  }

 private:
  // Steps [a, b) without autograd, from the state stored at a; stores the state at b.
  void forward_no_grad_op(int64_t a, int64_t b) {
    const Stored& from = entry_at(a);
    from.rng.restore();  // re-running from a stored state draws what the first pass drew
    State h = from.state;
    for (int64_t t0 = a; t0 < b; t0 += kAdvanceChunk) {  // NOTE [ Chunked advance ]
      const int64_t n = std::min(kAdvanceChunk, b - t0);
      h = forward_no_grad(workload_, t0, n, h);
      result_.counters.forward_no_grad += n;
      report_progress();
    }
    if (b == T_) note_end(h);
    stored_[b] = {std::move(h), RngState::capture(inputs_.device())};
  }

  // Steps [a, b) with autograd, from the state stored at a: a tape for backward_op.
  void forward_grad_op(int64_t a, int64_t b) {
    const int64_t n = b - a;
    const Stored& from = entry_at(a);
    from.rng.restore();
    Tape tape;
    tape.end = b;
    // Step 0 starts from the caller's h0 so its gradient lands where autograd would put
    // it; later ranges start from detached leaves whose .grad() is δh.
    tape.entry = a == 0 ? workload_.h0 : from.state.detached_leaves();
    tape.inputs = inputs_.narrow(0, a, n);  // [n, B, F]
    if (want_input_grad_) tape.inputs = tape.inputs.detach().requires_grad_(true);
    tape.block = forward_block(workload_, tape.inputs, a, n, tape.entry);
    result_.counters.forward_with_grad += n;
    report_progress();
    loss_ += tape.block.loss.detach();
    result_.step_losses.narrow(0, a, n).copy_(tape.block.step_losses);
    if (b == T_) note_end(tape.block.exit);
    if (kept_exits_[size_t(b)]) {
      tape.exit = Stored{tape.block.exit.detached(), RngState::capture(inputs_.device())};
    }
    tapes_[a] = std::move(tape);
    tape_at_end_[b] = a;
  }

  void report_progress() const {
    if (auto* sink = progress_sink()) {
      sink->advanced(result_.counters.forward_no_grad + result_.counters.forward_with_grad);
    }
  }

  // The state a forward op starts from: stored, or the exit of the live tape ending at `t`
  // (NOTE [ Kept tapes ]; the schedule was validated, so one of them exists).
  const Stored& entry_at(int64_t t) const {
    const auto stored = stored_.find(t);
    if (stored != stored_.end()) return stored->second;
    return *tapes_.at(tape_at_end_.at(t)).exit;
  }

  // Back-propagates the tape of [a, b) seeded with δh at b; leaves δh at a.
  void backward_op(int64_t a, int64_t b) {
    auto it = tapes_.find(a);
    Tape& tape = it->second;
    backward_block(tape.block, delta_);
    result_.counters.backward += b - a;
    std::vector<torch::Tensor> entry_grads;  // δh at a
    if (a > 0) {
      for (const auto& h : tape.entry) entry_grads.push_back(h.grad());
    }
    delta_ = State(std::move(entry_grads));
    // NOTE [ Steps no sequence reaches ]: when every sequence ends before a (a batch
    // padded to a bucket length), the range's inputs feed nothing and get no gradient;
    // their slice of dL/dx stays zero, as in full BPTT.
    if (want_input_grad_ && tape.inputs.grad().defined()) {
      input_grad_.narrow(0, a, b - a).copy_(tape.inputs.grad());
    }
    tapes_.erase(it);
    tape_at_end_.erase(b);
  }

  // The first op to reach T fixes the final state and where one forward pass leaves the
  // generators.
  void note_end(const State& final_state) {
    if (reached_end_) return;
    reached_end_ = true;
    result_.final_state = final_state.detached();
    after_forward_ = RngState::capture(inputs_.device());
  }

  const Workload& workload_;
  const torch::Tensor& inputs_;  // [T, B, F]
  const int64_t T_;
  const bool want_input_grad_;
  GradientResult result_;
  torch::Tensor loss_;
  torch::Tensor input_grad_;  // [T, B, F]
  std::map<int64_t, Stored> stored_;
  std::map<int64_t, Tape> tapes_;
  std::map<int64_t, int64_t> tape_at_end_;  // end -> begin of each live tape
  std::vector<bool> kept_exits_;            // [T + 1] kept_tape_exits(schedule)
  State delta_;  // δh at the start of the last back-propagated range; at T the caller's seed
  RngState after_forward_;   // where one forward pass leaves the generators
  bool reached_end_ = false;
};

}  // namespace

GradientResult execute_schedule(const Schedule& schedule, const Workload& workload) {
  Executor executor(schedule, workload);
  for (const Op& op : schedule.ops) executor.run(op);
  return executor.finish();
}

ScheduleMethod::ScheduleMethod(std::string name, std::string description, Scheduler scheduler)
    : name_(std::move(name)), description_(std::move(description)),
      scheduler_(std::move(scheduler)) {
  TORCH_CHECK(scheduler_, "ScheduleMethod ", name_, ": expected a scheduler, got none");
}

GradientResult ScheduleMethod::compute_impl(const Workload& workload) {
  return execute_schedule(scheduler_(workload), workload);
}

int64_t executor_bytes_beyond_full_bptt(const Workload& workload) {
  // step_loss_buffer and the loss summed over the tapes (a scalar) have the inputs' dtype.
  const auto& x = workload.batch.inputs;  // [T, B, F]
  return (workload.batch.time_steps() * workload.batch.batch_size() + 1) *
             int64_t(x.element_size()) +
         RngState::capture(x.device()).bytes();
}

}  // namespace vlrnn::schedule
