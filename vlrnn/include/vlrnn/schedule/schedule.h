#pragma once
// Schedules as data: every way of trading recomputation for memory over the time chain
// (uniform VLRNN blocks, sqrt(T) checkpointing, revolve, the DP planner) is one list of ops
// that one executor runs (schedule_method.h) and one simulator predicts (simulator.h).
// Shapes: the chain has T steps; "state t" is the recurrent state entering step t
// (state 0 = h0, state T = the final state); δh_t = dL/d(state t).
//
//   forward_no_grad(a, b)  from stored state a, run steps [a, b) without autograd, store state b
//   forward_grad(a, b)     from stored state a, run steps [a, b) recording autograd; keep the
//                          graph ("the tape") of [a, b) until it is back-propagated; while it
//                          lives, state b is available from it (NOTE [ Kept tapes ])
//   backward(a, b)         needs the tape of [a, b) and δh_b (none for b = T); back-propagates
//                          it, frees it, yields δh_a
//   free(t)                drops stored state t
//
// NOTE [ Schedule invariants ]
// State 0 (h0) is the caller's: it is always stored and cannot be freed. A valid schedule
// back-propagates every step exactly once, last to first, so backward ops come in strictly
// decreasing, contiguous ranges ending at δh_0; a tape is back-propagated whole (backward
// covers exactly one forward_grad range). Stored states left at the end are dropped by the
// executor (free ops at the end only lower nothing). Every step runs with grad exactly once,
// which is what lets the executor fill per-step losses from the tapes.
// A forward op starts from a stored state, or from the exit of a live tape
// (NOTE [ Kept tapes ]).
//
// NOTE [ Kept tapes ]
// Rotor's second way to spend memory: instead of storing only the state at k and
// recomputing [i, k) later, forward_grad(i, k) keeps the tape of [i, k) alive while [k, j) is
// reversed from the tape's exit state, then backward(i, k) runs with no recomputation:
//   forward_grad(i, k)  ...ops of [k, j) starting from state k...  backward(i, k)
// A tape holds its exit state (the graph's output), so state k needs no stored copy: the
// executor reads it from the tape, with the generators captured at the tape's end (a
// snapshot shared with the previous one when the model draws nothing: NOTE [ Shared RNG
// snapshots ]). The simulator charges such a tape one stored state on top of its steps (the
// snapshot and, conservatively, the state's tensors again). Backward ranges still run last
// to first, so the kept tape is back-propagated after everything after it.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::schedule {

enum class OpKind { kForwardNoGrad, kForwardGrad, kBackward, kFree };

std::string to_string(OpKind kind);

struct Op {
  OpKind kind = OpKind::kFree;
  int64_t begin = 0;  // a (for kFree: the state freed)
  int64_t end = 0;    // b (for kFree: equal to begin)

  static Op forward_no_grad(int64_t a, int64_t b) { return {OpKind::kForwardNoGrad, a, b}; }
  static Op forward_grad(int64_t a, int64_t b) { return {OpKind::kForwardGrad, a, b}; }
  static Op backward(int64_t a, int64_t b) { return {OpKind::kBackward, a, b}; }
  static Op free(int64_t t) { return {OpKind::kFree, t, t}; }
  int64_t steps() const { return end - begin; }
  // "forward_no_grad(0, 64)", "free(64)"
  std::string describe() const;
  // The op describe() wrote (spaces optional); throws naming the text and the forms it
  // takes otherwise. Recorded plans are read back through it.
  static Op parse(const std::string& text);
  bool operator==(const Op& o) const { return kind == o.kind && begin == o.begin && end == o.end; }
};

// What a schedule does, counted in steps (a step of one sequence batch).
struct ScheduleCounts {
  int64_t forward_no_grad_steps = 0;  // recomputation
  int64_t forward_grad_steps = 0;     // T for a valid schedule
  int64_t backward_steps = 0;         // T for a valid schedule
  int64_t max_stored_states = 0;      // the most stored states at once, state 0 excluded
  int64_t max_tape_steps = 0;         // the most steps of tape alive at once
  int64_t kept_tapes = 0;             // tapes a later forward op started from (NOTE [ Kept tapes ])
};

struct Schedule {
  int64_t time_steps = 0;  // T
  std::string name;        // who made it, e.g. "uniform(K=64)", "revolve(s=4)"
  std::vector<Op> ops;

  // Symbolic execution of every op's preconditions (NOTE [ Schedule invariants ]); throws
  // naming the op index, the op and what was wrong. Returns the counts.
  ScheduleCounts validate() const;
};

// The ends b of the forward_grad(a, b) ops whose exit state a later forward op starts from
// while state b is not stored (NOTE [ Kept tapes ]); `schedule` must be valid. [T + 1]
std::vector<bool> kept_tape_exits(const Schedule& schedule);

}  // namespace vlrnn::schedule
