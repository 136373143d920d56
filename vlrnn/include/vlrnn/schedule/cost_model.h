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

struct CostModel {
  // Seconds per step.
  std::vector<double> forward_seconds;       // [T] model only, no autograd (a recomputation)
  std::vector<double> forward_grad_seconds;  // [T] model + head with autograd (taping)
  std::vector<double> backward_seconds;      // [T] back-propagating the step's tape
  double op_seconds = 0.0;                   // fixed cost of one forward / backward call
  // A call on a block that reaches past the first end (first_end(), where the first sequence
  // of a variable-length batch ends) costs ended_call_seconds more: the model's lengths path
  // (the built-in modules select the running sequences' rows and put them back: NOTE [ Runs
  // between ends ] in models.cpp). NOTE [ What a call costs ] in cost_measurement.cpp. 0:
  // every call costs op_seconds.
  double ended_call_seconds = 0.0;
  // Long tapes run slower per step (memory traffic: their activations leave the caches and
  // are freshly allocated): a tape of n steps costs tape_growth_seconds · n² on top of its
  // per-step seconds. That is tape_growth_seconds per step taped or back-propagated, per
  // step of tape alive at that moment, the count by which a kept tape is priced too: it
  // slows every step taped and back-propagated while it lives (NOTE [ Kept tapes ]).
  double tape_growth_seconds = 0.0;

  // Bytes.
  std::vector<int64_t> tape_bytes;                // [T] activations a taped step keeps
  // [T] extra live while the step's tape is reversed: the model's own (NOTE [ Backward in
  // runs ] below), beside the head's output gradient, head_backward_step_bytes per step.
  std::vector<int64_t> backward_transient_bytes;
  std::vector<int64_t> advance_transient_bytes;   // [T] extra live per step of an advance chunk
  // Extra live per advance call, whatever its length: LibTorch 2.x's oneDNN LSTM reorders
  // its weights and fills a scratchpad with a part of its own (NOTE [ What a call holds,
  // whatever its length ] in cost_measurement.cpp).
  int64_t advance_op_bytes = 0;
  std::vector<int64_t> state_bytes;               // [T + 1] a stored state (tensors + RNG)
  // What a kept tape holds beyond its steps and its exit (charged as a stored state: NOTE [
  // Kept tapes ]), whatever its length: its own bytes, the intercept of its bytes beyond the
  // exit (2.x's oneDNN LSTM: its workspace's own part). The tape being reversed has them in
  // reversal_bytes.
  int64_t kept_tape_bytes = 0;
  // Per backward call of a tape of two or more steps, whatever its length: autograd sums a
  // weight's per-step gradients in buffers; a one-step tape has no sums and no such bytes.
  int64_t backward_op_bytes = 0;
  // What a backward call after the first needs beyond its tape's transient, whatever the
  // tape's length, its sums included: parameter gradients exist by then, so autograd
  // computes the new ones in buffers and adds them in, where the first call hands its
  // buffers over as the gradients (NOTE [ A later backward's bytes ] in
  // cost_measurement.cpp). A later call of two steps or more needs the larger of this and
  // backward_op_bytes.
  int64_t later_backward_bytes = 0;
  // A backward call of a tape of two steps or more after the first needs at least this much
  // beyond its tape and the transient of its first kFloorTapeSteps steps, however few its
  // steps: its weights' per-step gradients summed, and the sum added to the gradients (NOTE
  // [ A later backward's floor ] in cost_measurement.cpp). Above it, backward_call_bytes and
  // the tape's transient, as above.
  int64_t backward_floor_bytes = 0;
  // Live for the whole iteration: parameter gradients, per-step losses, the dL/dx
  // buffer, δh, h0's zeros when absent, the validated targets' copy, generator snapshots;
  // and reversal_bytes, at every op but an advance.
  int64_t fixed_bytes = 0;
  // Of fixed_bytes, what only reversing a tape holds, whatever its length: the tape's own
  // bytes (its loss, its exit state: NOTE [ One tape's own bytes ]) and its backward call's
  // (NOTE [ What a call holds, whatever its length ]; both in cost_measurement.cpp). An
  // advance needs fixed_bytes less this.
  int64_t reversal_bytes = 0;
  // Of fixed_bytes, what every step adds (per-step losses, the dL/dx buffer and x.grad, the
  // targets' copy): a batch of another length is priced with fixed_bytes changed by it.
  int64_t fixed_step_bytes = 0;
  // Parameter gradients: allocated by the first backward call, live from then on.
  int64_t gradient_bytes = 0;
  // NOTE [ Backward windows ]: 0 = a tape's backward transient is the sum of its steps'.
  // n > 0 = a model whose backward also fills one buffer of at most n steps, reused over a
  // longer tape (lstm_block's gate gradients: NOTE [ A transient that stops growing ] in
  // cost_measurement.cpp): a tape of k steps needs window_step_bytes for min(k, n) of its
  // steps on top of the sum of its steps' transients (what grows with the tape: the head's
  // output gradient, dL/dx, ...).
  int64_t backward_window_steps = 0;
  int64_t window_step_bytes = 0;  // 0 when backward_window_steps is
  // NOTE [ Backward in runs ]: a tape's backward first runs the head's backward for all its
  // steps at once. That leaves its output gradient live until the tape is reversed and frees
  // the head's own tape (a copy of the model's outputs among it): head_backward_step_bytes
  // per step, their difference, so signed (negative on a small batch, where the copy is the
  // larger). The model's own transient is then its steps' backward_transient_bytes summed
  // over the tape, unless backward_splits_at_ends: a model that runs the steps between two
  // ends of sequences as one call (the built-in modules: NOTE [ Runs between ends ] in
  // models.cpp) reverses those runs one at a time, last first, each needing its own steps'
  // sum while the tape after it is freed, and every run but the last holds the weight
  // gradients of those reversed before it beyond the per-call sums, max(0, gradient_bytes -
  // backward_op_bytes) (measured: NOTE [ Runs, measured ]). So a tape [a, b) needs
  // head · (b - a) plus the most any of its runs r = [s, e) needs, Σ_r
  // backward_transient_bytes - tape_bytes over [e, b) (+ the held gradients).
  int64_t head_backward_step_bytes = 0;
  int64_t backward_splits_at_ends = 0;  // 1: yes, 0: one run per tape

  // [T] how many sequences are still running at each step of the variable-length batch the
  // steps price (NOTE [ Variable lengths are measured on the batch ] in cost_measurement.cpp);
  // empty: a batch without lengths, its steps fitted on full ones.
  // Another batch is priced from it: NOTE [ Other batches of the workload ] in cost_model.cpp.
  std::vector<int64_t> active_sequences;

  std::string source;  // how it was obtained ("measured on ...", "synthetic")

  int64_t time_steps() const { return int64_t(forward_seconds.size()); }
  // The first end: the first step some sequence no longer has (from active_sequences, in
  // O(log T)); T when none ends before T, or the batch has no lengths.
  int64_t first_end() const;
  // Per-call seconds of running [a, b) in calls of at most `call_steps` steps from a (one
  // call: call_steps = b - a; an advance: kAdvanceChunk).
  double calls_seconds(int64_t a, int64_t b, int64_t call_steps) const;
  // The transient of advancing over [a, b) without grad in chunks of `chunk_steps` from a
  // (NOTE [ Chunked advance ]): the largest chunk's sum of advance_transient_bytes, and
  // advance_op_bytes. The simulator prices one advance with it; the planner bounds every
  // advance by [0, T)'s.
  int64_t advance_transient(int64_t a, int64_t b, int64_t chunk_steps) const;
  // What a backward call of a tape of `steps` steps needs beyond its tape and transient: its
  // sums, and when it is `later` than the first, the new gradients added in.
  int64_t backward_call_bytes(int64_t steps, bool later) const {
    const int64_t sums = steps >= 2 ? backward_op_bytes : 0;
    return later ? std::max(sums, later_backward_bytes) : sums;
  }
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
  visit("forward_seconds", m.forward_seconds);
  visit("forward_grad_seconds", m.forward_grad_seconds);
  visit("backward_seconds", m.backward_seconds);
  visit("op_seconds", m.op_seconds);
  visit("ended_call_seconds", m.ended_call_seconds);
  visit("tape_growth_seconds", m.tape_growth_seconds);
  visit("tape_bytes", m.tape_bytes);
  visit("backward_transient_bytes", m.backward_transient_bytes);
  visit("advance_transient_bytes", m.advance_transient_bytes);
  visit("advance_op_bytes", m.advance_op_bytes);
  visit("state_bytes", m.state_bytes);
  visit("kept_tape_bytes", m.kept_tape_bytes);
  visit("backward_op_bytes", m.backward_op_bytes);
  visit("later_backward_bytes", m.later_backward_bytes);
  visit("backward_floor_bytes", m.backward_floor_bytes);
  visit("fixed_bytes", m.fixed_bytes);
  visit("reversal_bytes", m.reversal_bytes);
  visit("fixed_step_bytes", m.fixed_step_bytes);
  visit("gradient_bytes", m.gradient_bytes);
  visit("head_backward_step_bytes", m.head_backward_step_bytes);
  visit("backward_splits_at_ends", m.backward_splits_at_ends);
  visit("backward_window_steps", m.backward_window_steps);
  visit("window_step_bytes", m.window_step_bytes);
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
    return one_step ? 0 : model.backward_splits_at_ends * model.gradient_bytes;
  }
  std::vector<int64_t> ends;  // where a run starts: steps with fewer sequences than the one before
};

}  // namespace vlrnn::schedule
