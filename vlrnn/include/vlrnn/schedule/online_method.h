#pragma once
// The online method: online checkpointing (vlrnn/schedule/online.h) on a whole batch, its
// schedule run by the one executor. The states it keeps are those a stream of unknown length
// keeps (OnlineStream, vlrnn/schedule/online_stream.h): what it recomputes beside revolve,
// which is told T, is the price of not knowing T.

#include "vlrnn/schedule/schedule_method.h"

namespace vlrnn {

struct OnlineOptions {
  // s: state slots, h0's included (as revolve's). Used when budget_bytes is 0.
  int64_t slots = 4;
  // Instead of slots: as many slots as states of the workload's size fit in these bytes.
  int64_t budget_bytes = 0;

  OnlineOptions& with_slots(int64_t s) { slots = s; return *this; }
  OnlineOptions& with_budget_bytes(int64_t bytes) { budget_bytes = bytes; return *this; }
};

// The bytes one state of `h0`'s shape holds: what a slot of a bytes budget costs.
int64_t state_slot_bytes(const State& h0);

// The slot count `options` gives for a state like `h0` (validated options).
int64_t online_slots(const OnlineOptions& options, const State& h0);

// Throws naming the option when `options` are inconsistent; returns them.
OnlineOptions checked_online_options(OnlineOptions options);

class OnlineMethod : public schedule::ScheduleMethod {
 public:
  explicit OnlineMethod(OnlineOptions options = {});
};

}  // namespace vlrnn
