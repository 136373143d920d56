#include "vlrnn/schedule/online.h"

#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace vlrnn::schedule {

OnlineCheckpointer::OnlineCheckpointer(int64_t slots) : slots_(slots) {
  TORCH_CHECK(slots >= 1, "online slots: expected s >= 1 state slots (h0's included), got ",
              slots);
  // h0 is never dropped: no later state reaches its level.
  held_.push_back({0, std::numeric_limits<int64_t>::max()});
}

OnlineMove OnlineCheckpointer::advance() {
  const Held working = held_.back();
  const Held next{working.position + 1, 0};
  // Room left: h0, the kept states and the working state take at most s + 1 places
  // (NOTE [ Online checkpointing ]: s − 1 kept states besides h0 and w).
  if (int64_t(held_.size()) < slots_ + 1) {
    held_.push_back(next);
    return {true, -1};
  }
  // The latest dispensable kept state: one with a higher level somewhere after it. Scanning
  // back from w, the first state below the highest level seen so far.
  int64_t highest_after = working.level;
  for (size_t i = held_.size() - 1; i-- > 1;) {
    if (held_[i].level < highest_after) {
      const int64_t dropped = held_[i].position;
      held_.erase(held_.begin() + int64_t(i));
      held_.push_back(next);
      return {true, dropped};
    }
    highest_after = std::max(highest_after, held_[i].level);
  }
  // None: w itself makes way, and w + 1 sits a level above it.
  held_.back() = {next.position, working.level + 1};
  return {false, -1};
}

std::vector<int64_t> OnlineCheckpointer::kept() const {
  std::vector<int64_t> positions;
  for (size_t i = 0; i + 1 < held_.size(); ++i) positions.push_back(held_[i].position);
  if (held_.size() == 1) positions.push_back(0);  // w = 0 is h0 itself
  return positions;
}

std::vector<OnlineInterval> online_intervals(const OnlineCheckpointer& checkpointer) {
  const auto kept = checkpointer.kept();  // [k + 1]: h0 first
  std::vector<OnlineInterval> intervals;
  int64_t end = checkpointer.position();
  for (size_t k = kept.size(); k-- > 0;) {
    if (kept[k] == end) continue;  // w = 0: nothing before it
    intervals.push_back({kept[k], end, checkpointer.slots() - int64_t(k)});
    end = kept[k];
  }
  return intervals;
}

namespace {

// Drives the rule from position 0 and writes the forward phase's ops. The working state
// advances in place between kept states, so the ops hold one advance per kept state: from
// the kept state it last started from (`advanced_from`) to the one it keeps.
class OnlineForwardPhase {
 public:
  explicit OnlineForwardPhase(int64_t slots) : checkpointer_(slots) {}

  void advance_to(int64_t working, std::vector<Op>& ops) {
    while (checkpointer_.position() < working) {
      const int64_t w = checkpointer_.position();
      const OnlineMove move = checkpointer_.advance();
      if (move.keeps_previous && w > advanced_from_) {
        ops.push_back(Op::forward_no_grad(advanced_from_, w));
        advanced_from_ = w;
      }
      if (move.dropped >= 0) ops.push_back(Op::free(move.dropped));
    }
  }

  const OnlineCheckpointer& checkpointer() const { return checkpointer_; }
  int64_t advanced_from() const { return advanced_from_; }

 private:
  OnlineCheckpointer checkpointer_;
  int64_t advanced_from_ = 0;
};

// The ops of revolve_schedule(end − begin, slots), moved to start at `begin`.
void append_revolve(const OnlineInterval& interval, std::vector<Op>& ops) {
  for (Op op : revolve_schedule(interval.end - interval.begin, interval.slots).ops) {
    op.begin += interval.begin;
    op.end += interval.begin;
    ops.push_back(op);
  }
}

}  // namespace

std::vector<Op> online_forward_ops(int64_t working, int64_t slots) {
  TORCH_CHECK(working >= 0, "online forward ops: expected a working position >= 0, got ",
              working);
  std::vector<Op> ops;
  OnlineForwardPhase(slots).advance_to(working, ops);
  return ops;
}

Schedule online_schedule(int64_t time_steps, int64_t slots) {
  TORCH_CHECK(time_steps >= 1, "online schedule: expected T >= 1, got ", time_steps);
  Schedule s;
  s.time_steps = time_steps;
  s.name = fmt::format("online(s={})", slots);
  OnlineForwardPhase forward(slots);
  const int64_t last = time_steps - 1;  // the working state when the stream ends
  forward.advance_to(last, s.ops);
  if (last > forward.advanced_from()) {
    s.ops.push_back(Op::forward_no_grad(forward.advanced_from(), last));
  }
  s.ops.push_back(Op::forward_grad(last, time_steps));
  s.ops.push_back(Op::backward(last, time_steps));
  if (last > 0) s.ops.push_back(Op::free(last));
  for (const auto& interval : online_intervals(forward.checkpointer())) {
    append_revolve(interval, s.ops);
    if (interval.begin > 0) s.ops.push_back(Op::free(interval.begin));
  }
  return s;
}

OnlineCost online_cost(const OnlineCheckpointer& checkpointer) {
  OnlineCost cost;
  const int64_t last = checkpointer.position();  // steps [0, last) are advanced once on the way
  cost.forward_no_grad_steps = last;
  cost.repetitions = last > 0 ? 1 : 0;
  for (const auto& interval : online_intervals(checkpointer)) {
    const int64_t steps = interval.end - interval.begin;
    cost.forward_no_grad_steps += binomial_forward_steps(steps, interval.slots);
    if (steps >= 2) {
      cost.repetitions =
          std::max(cost.repetitions, 1 + binomial_repetitions(steps, interval.slots));
    }
  }
  return cost;
}

int64_t online_slots_for_bytes(int64_t budget_bytes, int64_t state_bytes,
                               const std::string& argument) {
  TORCH_CHECK(state_bytes > 0, argument, ": a state of ", state_bytes, " bytes cannot be budgeted");
  const int64_t slots = budget_bytes / state_bytes;
  TORCH_CHECK(slots >= 1, argument, ": expected room for at least one state of ", state_bytes,
              " bytes, got ", budget_bytes, " bytes");
  return slots;
}

}  // namespace vlrnn::schedule
