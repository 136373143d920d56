#include "vlrnn/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace vlrnn::schedule {

std::string to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kForwardNoGrad: return "forward_no_grad";
    case OpKind::kForwardGrad: return "forward_grad";
    case OpKind::kBackward: return "backward";
    case OpKind::kFree: return "free";
  }
  return "?";
}

std::string Op::describe() const {
  if (kind == OpKind::kFree) return fmt::format("free({})", begin);
  return fmt::format("{}({}, {})", to_string(kind), begin, end);
}

Op Op::parse(const std::string& text) {
  std::string compact;  // without spaces: "forward_grad(0,64)"
  for (char c : text) {
    if (c != ' ') compact += c;
  }
  const auto fail = [&] {
    TORCH_CHECK(false, "schedule op: expected forward_no_grad(a, b), forward_grad(a, b), "
                       "backward(a, b) or free(t) with integers a < b, got \"", text, "\"");
  };
  const auto open = compact.find('(');
  if (open == std::string::npos || compact.empty() || compact.back() != ')') fail();
  const std::string kind_name = compact.substr(0, open);
  // The integers between the parentheses, separated by commas.
  std::vector<int64_t> numbers;
  std::istringstream args(compact.substr(open + 1, compact.size() - open - 2));
  for (std::string field; std::getline(args, field, ',');) {
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(field, &used);
    } catch (const std::exception&) {
      fail();
    }
    if (used != field.size()) fail();
    numbers.push_back(value);
  }
  for (const auto kind : {OpKind::kForwardNoGrad, OpKind::kForwardGrad, OpKind::kBackward}) {
    if (kind_name == to_string(kind)) {
      if (numbers.size() != 2 || numbers[0] >= numbers[1]) fail();
      return {kind, numbers[0], numbers[1]};
    }
  }
  if (kind_name != to_string(OpKind::kFree) || numbers.size() != 1) fail();
  return free(numbers[0]);
}

ScheduleCounts Schedule::validate() const {
  const int64_t T = time_steps;
  TORCH_CHECK(T >= 1, "schedule ", name, ": expected time_steps T >= 1, got ", T);
  ScheduleCounts counts;
  std::set<int64_t> stored{0};        // state 0 = h0, always there
  std::map<int64_t, int64_t> tapes;   // begin -> end of each live tape
  std::set<int64_t> tape_ends;        // their ends: states a forward op may start from
  int64_t tape_steps = 0;
  int64_t delta_at = T;               // δh is known at this state (T: the end, seeded by the loss)
  std::vector<bool> with_grad(size_t(T), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const auto where = [&] { return fmt::format("schedule {}: op [{}] {}", name, i, op.describe()); };
    if (op.kind == OpKind::kFree) {
      TORCH_CHECK(op.begin != 0, where(), ": state 0 is the caller's h0 and cannot be freed");
      TORCH_CHECK(stored.count(op.begin), where(), ": state ", op.begin, " is not stored");
      stored.erase(op.begin);
      continue;
    }
    TORCH_CHECK(0 <= op.begin && op.begin < op.end && op.end <= T, where(),
                ": expected a range 0 <= a < b <= T = ", T);
    switch (op.kind) {
      case OpKind::kForwardNoGrad:
        TORCH_CHECK(stored.count(op.begin) || tape_ends.count(op.begin), where(),
                    ": needs stored state ", op.begin, ", which is not stored (nor the exit "
                    "of a live tape)");
        TORCH_CHECK(!stored.count(op.end), where(), ": state ", op.end, " is already stored");
        stored.insert(op.end);
        counts.forward_no_grad_steps += op.steps();
        break;
      case OpKind::kForwardGrad: {
        TORCH_CHECK(stored.count(op.begin) || tape_ends.count(op.begin), where(),
                    ": needs stored state ", op.begin, ", which is not stored (nor the exit "
                    "of a live tape)");
        for (int64_t t = op.begin; t < op.end; ++t) {
          TORCH_CHECK(!with_grad[size_t(t)], where(), ": step ", t,
                      " already ran with grad (every step is taped exactly once)");
          with_grad[size_t(t)] = true;
        }
        tapes[op.begin] = op.end;
        tape_ends.insert(op.end);
        tape_steps += op.steps();
        counts.forward_grad_steps += op.steps();
        break;
      }
      case OpKind::kBackward: {
        auto it = tapes.find(op.begin);
        TORCH_CHECK(it != tapes.end() && it->second == op.end, where(),
                    ": needs the tape of exactly [", op.begin, ", ", op.end,
                    ") from a forward_grad op, which is not alive");
        TORCH_CHECK(delta_at == op.end, where(), ": needs δh at state ", op.end,
                    ", but δh is known at state ", delta_at,
                    " (backward ranges must run last to first, contiguously)");
        tapes.erase(it);
        tape_ends.erase(op.end);
        tape_steps -= op.steps();
        delta_at = op.begin;
        counts.backward_steps += op.steps();
        break;
      }
      case OpKind::kFree: break;
    }
    counts.max_stored_states =
        std::max(counts.max_stored_states, int64_t(stored.size()) - 1);
    counts.max_tape_steps = std::max(counts.max_tape_steps, tape_steps);
  }
  const auto kept = kept_tape_exits(*this);
  counts.kept_tapes = std::count(kept.begin(), kept.end(), true);
  TORCH_CHECK(tapes.empty(), "schedule ", name, ": ", tapes.size(),
              " tape(s) never back-propagated, the first [", tapes.begin()->first, ", ",
              tapes.begin()->second, ")");
  TORCH_CHECK(delta_at == 0, "schedule ", name, ": δh reached state ", delta_at,
              ", expected state 0 (steps [0, ", delta_at, ") were never back-propagated)");
  return counts;
}

std::vector<bool> kept_tape_exits(const Schedule& schedule) {
  std::vector<bool> kept(size_t(schedule.time_steps + 1), false);
  std::set<int64_t> stored{0};
  for (const Op& op : schedule.ops) {
    const bool forward = op.kind == OpKind::kForwardNoGrad || op.kind == OpKind::kForwardGrad;
    if (forward && !stored.count(op.begin)) kept[size_t(op.begin)] = true;
    if (op.kind == OpKind::kForwardNoGrad) stored.insert(op.end);
    if (op.kind == OpKind::kFree) stored.erase(op.begin);
  }
  return kept;
}

}  // namespace vlrnn::schedule
