#pragma once
// The cost model the simulator and the planner read: plain data, per step so that a chain
// may be heterogeneous (variable-length batches: later steps have fewer active sequences and
// cost less; a head whose cost differs from the cell's), and checking itself.
// Shapes: T steps; per-step vectors have T entries, state_bytes has T + 1 (state 0 = h0 is
// the caller's and costs nothing to store).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::schedule {

// The longest tape a cost measurement runs (cost_measurement.cpp): a model measured on at
// least this many steps prices a batch of any length (CostModel::prices_batch).
constexpr int64_t kLongestMeasuredTape = 1024;
// The tapes a later backward's floor is measured on (CostModel::backward_floor_bytes): its
// transient over this many steps comes on top of the floor.
constexpr int64_t kFloorTapeSteps = 2;

// NOTE [ Cost model by lifetime ]: the terms are grouped by how long what they price lives:
// a step's own (its tape, its transients, its state), a call's (one forward or backward call
// of the model, whatever its length), a backward call's beyond its tape, and the whole
// iteration's. What the terms mean is defined by one function, simulate() (simulator.cpp:
// the live bytes and seconds op by op, in ~70 lines); the comments below say what each one
// measures. How each is measured: cost_measurement.cpp; what each buys: docs/methods.md
// (NOTE [ What each term buys ] in tests/schedule/test_schedule.cpp).
struct CostModel {
  // Per step: [T] entries (state_bytes [T + 1]), so that a chain may be heterogeneous.
  struct PerStep {
    std::vector<double> forward_seconds;       // model only, no autograd (a recomputation)
    std::vector<double> forward_grad_seconds;  // model + head with autograd (taping)
    std::vector<double> backward_seconds;      // back-propagating the step's tape
    std::vector<int64_t> tape_bytes;           // activations a taped step keeps
    // Extra live while the step's tape is reversed: the model's own (NOTE [ Backward in
    // runs ]), beside the head's output gradient (PerBackward::head_step_bytes).
    std::vector<int64_t> backward_transient_bytes;
    std::vector<int64_t> advance_transient_bytes;  // extra live per step of an advance chunk
    std::vector<int64_t> state_bytes;  // [T + 1] a stored state (tensors + RNG); state 0 free
  } step;

  // Per call of the model, whatever its length.
  struct PerCall {
    double op_seconds = 0.0;  // fixed cost of one forward / backward call
    // More for a call reaching past the first end (first_end()): the model's lengths path
    // (NOTE [ Runs between ends ] in models.cpp; NOTE [ What a call costs ]).
    double ended_seconds = 0.0;
    // A tape of n steps costs tape_growth_seconds · n² on top of its steps' seconds (memory
    // traffic: long tapes leave the caches); a kept tape slows every step run while it lives
    // the same way (NOTE [ Kept tapes ]).
    double tape_growth_seconds = 0.0;
    // Extra live per advance call: 2.x's oneDNN LSTM reorders its weights and fills a
    // scratchpad (NOTE [ What a call holds, whatever its length ]).
    int64_t advance_op_bytes = 0;
    // A kept tape's own bytes beyond its steps and its exit (2.x's oneDNN LSTM: its
    // workspace's own part); the tape being reversed has them in reversal_bytes.
    int64_t kept_tape_bytes = 0;
  } call;

  // Per backward call, beyond its tape and its steps' transients.
  struct PerBackward {
    // A tape of two or more steps: autograd sums a weight's per-step gradients in buffers.
    int64_t sums_bytes = 0;
    // A call after the first, whatever its length, its sums included: the new parameter
    // gradients computed in buffers and added in (NOTE [ A later backward's bytes ]). A later
    // call of two steps or more needs the larger of this and sums_bytes (call_bytes()).
    int64_t later_bytes = 0;
    // A later call of two steps or more needs at least this beyond its tape and the
    // transient of its first kFloorTapeSteps steps (NOTE [ A later backward's floor ]).
    int64_t floor_bytes = 0;
    // Per step of the tape, signed: the head's output gradient less the head's own tape,
    // both freed or made at once when the head's backward runs first (NOTE [ Backward in
    // runs ]; negative on a small batch, where the tape is the larger).
    int64_t head_step_bytes = 0;
    // NOTE [ Backward in runs ]: whether the model reverses the runs between two ends of
    // sequences one at a time (the built-in modules: NOTE [ Runs between ends ] in
    // models.cpp), last first, each needing its own steps' transients while the tape after
    // it is freed, every run but the last holding the weight gradients of those reversed
    // before it, max(0, gradient_bytes - sums_bytes) (NOTE [ Runs, measured ]). False: one
    // run per tape, the sum of its steps' transients.
    bool splits_at_ends = false;
    // NOTE [ Backward windows ]: 0, or a model whose backward also fills one buffer of at
    // most window_steps steps, reused over a longer tape (lstm_block's gate gradients: NOTE
    // [ A transient that stops growing ]): a tape of k steps needs window_step_bytes for
    // min(k, window_steps) steps on top of its steps' transients.
    int64_t window_steps = 0;
    int64_t window_step_bytes = 0;  // 0 when window_steps is

    // What a backward call of a tape of `steps` steps needs beyond its tape and transient:
    // its sums, and when it is `later` than the first, the new gradients added in.
    int64_t call_bytes(int64_t steps, bool later) const {
      const int64_t sums = steps >= 2 ? sums_bytes : 0;
      return later ? std::max(sums, later_bytes) : sums;
    }
  } backward;

  // Per iteration: live from start to end.
  struct PerIteration {
    // Parameter gradients (from the first backward on: gradient_bytes), per-step losses, the
    // dL/dx buffer, δh, h0's zeros when absent, the targets' copy, generator snapshots; and
    // reversal_bytes, at every op but an advance.
    int64_t fixed_bytes = 0;
    // Of fixed_bytes, what only reversing a tape holds: the tape's own bytes (its loss, its
    // exit state: NOTE [ One tape's own bytes ]) and its backward call's. An advance needs
    // fixed_bytes less this.
    int64_t reversal_bytes = 0;
    // Of fixed_bytes, what every step adds (losses, dL/dx and x.grad, the targets' copy): a
    // batch of another length is priced with fixed_bytes changed by it.
    int64_t fixed_step_bytes = 0;
    int64_t gradient_bytes = 0;  // parameter gradients: made by the first backward call
  } iteration;

  // [T] how many sequences are still running at each step of the variable-length batch the
  // steps price (NOTE [ Variable lengths are measured on the batch ] in cost_measurement.cpp);
  // empty: a batch without lengths, its steps fitted on full ones.
  // Another batch is priced from it: NOTE [ Other batches of the workload ] in cost_model.cpp.
  std::vector<int64_t> active_sequences;

  std::string source;  // how it was obtained ("measured on ...", "synthetic")

  int64_t time_steps() const { return int64_t(step.forward_seconds.size()); }
  // The first end: the first step some sequence no longer has (from active_sequences, in
  // O(log T)); T when none ends before T, or the batch has no lengths.
  int64_t first_end() const;
  // Per-call seconds of running [a, b) in calls of at most `call_steps` steps from a (one
  // call: call_steps = b - a; an advance: kAdvanceChunk).
  double calls_seconds(int64_t a, int64_t b, int64_t call_steps) const;
  // The transient of advancing over [a, b) without grad in chunks of `chunk_steps` from a
  // (NOTE [ Chunked advance ]): the largest chunk's sum of advance_transient_bytes, and
  // call.advance_op_bytes. The simulator prices one advance with it; the planner bounds every
  // advance by [0, T)'s.
  int64_t advance_transient(int64_t a, int64_t b, int64_t chunk_steps) const;
  // Whether for_batch(time_steps, active) can price another batch of the workload this
  // model was measured on, of `time_steps` steps whose steps have `active` sequences
  // ([time_steps]; empty: a batch without lengths, as this model's must then be). Its steps
  // must be at most this model's, or this model measured on kLongestMeasuredTape steps or
  // more (every measurement that depends on T saw its whole length by then); and this model
  // must have seen some sequence end if `active` has one end.
  bool prices_batch(int64_t time_steps, const std::vector<int64_t>& active) const;
  // This model's costs for such a batch (NOTE [ Other batches of the workload ]); the same
  // length and counts give it back unchanged. Throws when prices_batch() is false.
  CostModel for_batch(int64_t time_steps, const std::vector<int64_t>& active) const;
  // for_batch's pricing without its checks: for a measurement that profiled some steps of a
  // long batch and vouches that what it learnt from long tapes covers `time_steps` (NOTE [
  // Variable lengths are measured on the batch ] in cost_measurement.cpp). Needs a model with
  // active counts, or `active` empty.
  CostModel through_active_counts(int64_t time_steps, const std::vector<int64_t>& active) const;
  // Throws naming the field when sizes disagree or a value is negative or not finite.
  void check() const;

  // A synthetic model, the same costs at every step (state 0 free, no transients, no
  // per-call costs): for tests and examples. Sums over ranges of steps: CostPrefix.
  static CostModel uniform(int64_t time_steps, double forward_s, double forward_grad_s,
                           double backward_s, int64_t tape_b, int64_t state_b,
                           int64_t fixed_b = 0);
};

// Every field of a CostModel, by name, in one list: check() and the disk cache (NOTE [ Cost
// models on disk ] in cost_model_cache.h) read them through it. `Model` is CostModel or
// const CostModel; `visit(name, field)` is called once per field.
template <typename Model, typename Visit>
void for_each_field(Model& m, Visit&& visit) {
  visit("step.forward_seconds", m.step.forward_seconds);
  visit("step.forward_grad_seconds", m.step.forward_grad_seconds);
  visit("step.backward_seconds", m.step.backward_seconds);
  visit("step.tape_bytes", m.step.tape_bytes);
  visit("step.backward_transient_bytes", m.step.backward_transient_bytes);
  visit("step.advance_transient_bytes", m.step.advance_transient_bytes);
  visit("step.state_bytes", m.step.state_bytes);
  visit("call.op_seconds", m.call.op_seconds);
  visit("call.ended_seconds", m.call.ended_seconds);
  visit("call.tape_growth_seconds", m.call.tape_growth_seconds);
  visit("call.advance_op_bytes", m.call.advance_op_bytes);
  visit("call.kept_tape_bytes", m.call.kept_tape_bytes);
  visit("backward.sums_bytes", m.backward.sums_bytes);
  visit("backward.later_bytes", m.backward.later_bytes);
  visit("backward.floor_bytes", m.backward.floor_bytes);
  visit("backward.head_step_bytes", m.backward.head_step_bytes);
  visit("backward.splits_at_ends", m.backward.splits_at_ends);
  visit("backward.window_steps", m.backward.window_steps);
  visit("backward.window_step_bytes", m.backward.window_step_bytes);
  visit("iteration.fixed_bytes", m.iteration.fixed_bytes);
  visit("iteration.reversal_bytes", m.iteration.reversal_bytes);
  visit("iteration.fixed_step_bytes", m.iteration.fixed_step_bytes);
  visit("iteration.gradient_bytes", m.iteration.gradient_bytes);
  visit("active_sequences", m.active_sequences);
  visit("source", m.source);
}

// Prefix sums of a cost model: O(1) sums over any range of steps. It reads the model's
// scalars from the model itself, which must outlive it.
struct CostPrefix {
  explicit CostPrefix(const CostModel& model);
  const CostModel& model;
  std::vector<double> forward, forward_grad, backward;  // [T + 1]
  std::vector<int64_t> tape, backward_transient;        // [T + 1]
  double forward_s(int64_t a, int64_t b) const { return forward[b] - forward[a]; }
  double forward_grad_s(int64_t a, int64_t b) const { return forward_grad[b] - forward_grad[a]; }
  double backward_s(int64_t a, int64_t b) const { return backward[b] - backward[a]; }
  int64_t tape_b(int64_t a, int64_t b) const { return tape[b] - tape[a]; }
  // The backward transient of a tape [a, b) (NOTE [ Runs between ends ]), and the buffer its
  // steps fill in a model with backward windows (NOTE [ Backward windows ]): O(1), or
  // O(ends in [a, b)) where the backward splits at ends.
  int64_t tape_transient_b(int64_t a, int64_t b) const;
  // What tape_transient_b adds to a tape's steps at most, once per tape (a one-step tape is
  // one run): for the planner's per-step bounds, a tape of k steps needs at most this and k
  // times its largest step's tape, transient and window step.
  int64_t per_tape_transient_bound(bool one_step) const {
    return one_step || !model.backward.splits_at_ends ? 0 : model.iteration.gradient_bytes;
  }
  std::vector<int64_t> ends;  // where a run starts: steps with fewer sequences than the one before
};

}  // namespace vlrnn::schedule
