#pragma once
// Online checkpointing: which states to keep is decided while the forward pass runs, each
// decision from the steps seen so far (never from T), under a fixed budget of s state slots
// (h0's included, as revolve's). When the stream ends T is known, and each interval between
// kept states is reversed by revolve in the slots the states before it leave free.
// Positions: position t is state t (the state entering step t); the working state w is the
// newest state the forward pass holds. The s slots hold h0 and up to s − 1 kept states, as
// revolve's; w comes on top, as the state revolve's advances end at: s states besides h0.
//
// NOTE [ Online checkpointing ]
// The rule is Wang, Moin and Iaccarino's dynamic checkpointing (SIAM J. Sci. Comput. 31(4),
// 2549-2567, 2009). Each held state has a level (h0: infinite; a new one: 0). While a slot is
// free, w is kept. Moving w to w + 1 with every slot taken: if a kept state is dispensable (a
// later held state has a higher level), the latest such is dropped and w is kept; otherwise
// w is dropped and w + 1 takes w's level + 1. Why: whenever the stream stops, the states held
// admit a reversal with revolve's optimal repetition number for that T (no step advanced more
// than t times, t the smallest with C(s + t, s) >= T), and up to T = β(s, 2) revolve's exact
// minimum (Stumm and Walther, SIAM J. Sci. Comput. 32(2), 836-854, 2010). Both hold at every
// T <= 100,000 for every s tested (tests/schedule/test_online.cpp; docs/methods.md).

#include "vlrnn/schedule/schedule.h"

#include <cstdint>
#include <vector>

namespace vlrnn::schedule {

// What one move of the working state from w to w + 1 does to the states held.
struct OnlineMove {
  bool keeps_previous = false;  // state w stays, as a kept state (always, for w = 0: h0)
  int64_t dropped = -1;         // the position of a kept state dropped, or -1
};

// The rule of NOTE [ Online checkpointing ], one move at a time.
class OnlineCheckpointer {
 public:
  explicit OnlineCheckpointer(int64_t slots);

  // Moves the working state from position() to position() + 1.
  OnlineMove advance();
  int64_t position() const { return held_.back().position; }  // w
  int64_t slots() const { return slots_; }
  // The kept states' positions, ascending: 0 (h0) first, w excluded.
  std::vector<int64_t> kept() const;

 private:
  struct Held {
    int64_t position;
    int64_t level;
  };
  int64_t slots_;
  std::vector<Held> held_;  // ascending positions: h0 first, the working state last
};

// One interval of the reversal: steps [begin, end) reversed by revolve with `slots` slots.
struct OnlineInterval {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t slots = 1;
};

// The intervals between `checkpointer`'s kept states and its working state, in the order the
// reversal visits them (last first). The stream ended at T = position() + 1: step T − 1 runs
// from the working state first, then interval k (k kept states before it, h0 excluded) has
// s − k slots, those the states still held leave it.
std::vector<OnlineInterval> online_intervals(const OnlineCheckpointer& checkpointer);

// The ops of the forward phase while the working state moves from 0 to `working`: the
// no-grad advances to each state kept and the drops, each decided at its move, whatever T
// turns out to be. online_schedule(T, s) starts with online_forward_ops(T − 1, s).
std::vector<Op> online_forward_ops(int64_t working, int64_t slots);

// The whole schedule for T steps and s slots: the forward phase, the advance to state T − 1,
// step T − 1 with grad, then each of online_intervals() by revolve.
Schedule online_schedule(int64_t time_steps, int64_t slots);

// What online_schedule(position() + 1, s) recomputes, from the states held, without
// building it: its no-grad steps, and the most times it advances any one step.
struct OnlineCost {
  int64_t forward_no_grad_steps = 0;
  int64_t repetitions = 0;
};
OnlineCost online_cost(const OnlineCheckpointer& checkpointer);

// The most states of `state_bytes` bytes each that `budget_bytes` holds: the slot count of a
// bytes budget; throws naming `argument` when not even one fits.
int64_t online_slots_for_bytes(int64_t budget_bytes, int64_t state_bytes,
                               const std::string& argument);

}  // namespace vlrnn::schedule
