#pragma once
// Schedulers that need no cost model; each emits the same op list (schedule.h).
//   uniform(T, K): VLRNN as a schedule: store the entry of every block of K steps in one
//                  pass without grad, then re-run each block with grad, last to first.
//   sqrt_checkpoint(T): sqrt(T) checkpointing (torch.utils.checkpoint with ceil(sqrt(T))
//                  segments) as a schedule: the uniform schedule with ceil(T / ceil(sqrt T))
//                  steps per segment.
//   revolve(T, s): Griewank's binomial checkpointing with s state slots (the slot holding
//                  h0 included): the fewest recomputed steps any schedule with s slots and
//                  one-step tapes can have (binomial_forward_steps below). An op list also
//                  stores the working state an advance ends at, which revolve's model does
//                  not count: at most s stored states besides h0 at once.

#include "vlrnn/schedule/schedule.h"

namespace vlrnn::schedule {

Schedule uniform_schedule(int64_t time_steps, int64_t block_length);
Schedule sqrt_checkpoint_schedule(int64_t time_steps);
Schedule revolve_schedule(int64_t time_steps, int64_t slots);

// β(s, t) = C(s + t, s): the longest chain s slots reverse with at most t forward
// recomputations of any step (saturating at INT64_MAX).
int64_t binomial_beta(int64_t slots, int64_t repetitions);
// The smallest t with β(s, t) >= T.
int64_t binomial_repetitions(int64_t time_steps, int64_t slots);
// Griewank's minimum number of recomputed (no-grad) forward steps to reverse T steps with s
// slots: t·T − β(s + 1, t − 1), t = binomial_repetitions(T, s) (T·(T−1)/2 for s = 1).
int64_t binomial_forward_steps(int64_t time_steps, int64_t slots);

// The revolve slot counts worth pricing for T steps, ascending: from 2 up to the first that
// needs no step recomputed twice (more slots only store more), skipping those that
// recompute more than kRevolveMaxRecomputation·T steps (at most ~T·log T). The planner and
// `vlrnn budget` both try exactly these.
constexpr int64_t kRevolveMaxSlots = 64;
constexpr int64_t kRevolveMaxRecomputation = 64;
std::vector<int64_t> revolve_slot_counts(int64_t time_steps);

}  // namespace vlrnn::schedule
