#include "vlrnn/schedule/planner.h"

#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace vlrnn::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t max_of(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t m = 0;
  for (size_t i = from; i < v.size(); ++i) m = std::max(m, v[i]);
  return m;
}

// The largest advance chunk's transient (NOTE [ Chunked advance ]).
int64_t max_chunk_transient(const CostModel& m) {
  int64_t best = 0;
  const int64_t T = m.time_steps();
  for (int64_t t0 = 0; t0 < T; t0 += kAdvanceChunk) {
    int64_t chunk = 0;
    for (int64_t t = t0; t < std::min(T, t0 + kAdvanceChunk); ++t) {
      chunk += m.advance_transient_bytes[size_t(t)];
    }
    best = std::max(best, chunk);
  }
  return best;
}

// The homogeneous sub-DP H(l, c) of NOTE [ Planner DP ]: fewest recomputed steps to reverse
// l steps with c states stored, each step taping `step_bytes` and each state `state_bytes`.
class InnerDp {
 public:
  InnerDp(int64_t max_length, int64_t available, int64_t step_bytes, int64_t state_bytes,
          int64_t per_tape_bytes, int64_t advance_bytes, int64_t single_tape_bytes)
      : max_length_(max_length),
        states_(std::max<int64_t>(0, std::min(kMaxInnerStates,
                                              (available - advance_bytes) / state_bytes))) {
    const auto W = size_t(states_ + 1);
    cost_.assign(size_t(max_length + 1) * W, kInf);
    split_.assign(size_t(max_length + 1) * W, -1);
    capacity_.assign(W + 1, 0);
    for (int64_t c = 0; c <= states_ + 1; ++c) {
      const int64_t room = available - c * state_bytes - per_tape_bytes;
      capacity_[size_t(c)] = room < 0         ? 0
                             : step_bytes <= 0 ? max_length
                                               : std::min(max_length, room / step_bytes);
      // A one-step tape needs no per-call backward bytes (cost_model.h).
      if (capacity_[size_t(c)] == 0 &&
          available - c * state_bytes - single_tape_bytes - step_bytes >= 0) {
        capacity_[size_t(c)] = 1;
      }
    }
    for (int64_t c = states_; c >= 0; --c) {
      for (int64_t l = 1; l <= max_length; ++l) {
        if (l <= capacity_[size_t(c)]) {
          at(l, c) = 0;
          split_at(l, c) = 0;
          continue;
        }
        if (c == states_ || capacity_[size_t(c + 1)] < 1) continue;
        double best = kInf;
        int64_t best_y = -1;
        const auto consider = [&](int64_t y) {
          if (y < 1 || y >= l) return;
          const double v = double(y) + at(l - y, c + 1) + at(y, c);
          if (v < best) {
            best = v;
            best_y = y;
          }
        };
        for (int64_t y = 1; y <= std::min<int64_t>(16, l - 1); ++y) consider(y);
        for (int64_t j = 1; j < 64; ++j) consider((l * j + 63) / 64);
        consider(l - capacity_[size_t(c + 1)]);
        at(l, c) = best;
        split_at(l, c) = best_y;
      }
    }
  }
  double cost(int64_t l, int64_t c) const { return c > states_ ? kInf : cost_[index(l, c)]; }
  // Emits the schedule of [a, a + l) with c states stored.
  void emit(int64_t a, int64_t l, int64_t c, std::vector<Op>& ops) const {
    const int64_t y = split_[index(l, c)];
    TORCH_CHECK(y >= 0, "planner: internal error, no inner plan for ", l, " steps with ", c,
                " states");
    if (y == 0) {
      ops.push_back(Op::forward_grad(a, a + l));
      ops.push_back(Op::backward(a, a + l));
      return;
    }
    ops.push_back(Op::forward_no_grad(a, a + y));
    emit(a + y, l - y, c + 1, ops);
    ops.push_back(Op::free(a + y));
    emit(a, y, c, ops);
  }

 private:
  size_t index(int64_t l, int64_t c) const { return size_t(l) * size_t(states_ + 1) + size_t(c); }
  double& at(int64_t l, int64_t c) { return cost_[index(l, c)]; }
  int64_t& split_at(int64_t l, int64_t c) { return split_[index(l, c)]; }
  int64_t max_length_, states_;
  std::vector<double> cost_;
  std::vector<int64_t> split_;
  std::vector<int64_t> capacity_;
};

}  // namespace

int64_t minimum_budget(const CostModel& model) {
  model.check();
  int64_t worst_step = 0;
  for (int64_t t = 0; t < model.time_steps(); ++t) {
    worst_step = std::max(worst_step, model.tape_bytes[size_t(t)] +
                                          model.backward_transient_bytes[size_t(t)]);
  }
  // Reversing any step but step 0 needs its entry stored; an advance stores its end.
  const int64_t state = model.time_steps() > 1 ? max_of(model.state_bytes, 1) : 0;
  // The quadratic schedule: one state stored, one-step tapes, a second backward's sums.
  return model.fixed_bytes + model.gradient_bytes +
         std::max(max_chunk_transient(model) + state,
                  state + worst_step + model.tape_op_bytes +
                      (model.time_steps() > 1 ? model.accumulate_single_bytes : 0));
}

Schedule dp_schedule(const CostModel& model, int64_t budget_bytes) {
  model.check();
  const int64_t T = model.time_steps();
  const int64_t N = std::min(T, kMaxSuperSteps);
  std::vector<int64_t> p(size_t(N + 1));
  for (int64_t i = 0; i <= N; ++i) p[size_t(i)] = i * T / N;  // super-step boundaries
  const CostPrefix sums(model);
  const int64_t s = std::max<int64_t>(1, max_of(model.state_bytes, 1));
  const int64_t per_tape = model.tape_op_bytes + model.backward_op_bytes + model.accumulate_bytes;
  const int64_t single_tape = model.tape_op_bytes + model.accumulate_single_bytes;
  // What tapes and stored states may use (NOTE [ Planner DP ]). An advance's transient
  // (its largest chunk) only meets stored states, never a tape: storing the c-th state
  // needs c·s + chunk <= available, reversing a tape with c states stored needs
  // c·s + tape + transient <= available.
  // Parameter gradients and the sums of later backward calls are charged throughout
  // (conservative: they only exist from the first backward on).
  const int64_t available = budget_bytes - model.fixed_bytes - model.gradient_bytes;
  const int64_t chunk = max_chunk_transient(model);
  TORCH_CHECK(available > 0, "planner budget: ", budget_bytes, " bytes leave nothing for tapes "
              "and states (fixed bytes ", model.fixed_bytes, "); the minimum is ",
              minimum_budget(model), " bytes");
  const int64_t C =
      std::max<int64_t>(0, std::min({N - 1, (available - chunk) / s, kMaxStates}));

  int64_t longest = 0;
  for (int64_t i = 0; i < N; ++i) longest = std::max(longest, p[size_t(i + 1)] - p[size_t(i)]);
  int64_t step_bytes = 0;
  for (int64_t t = 0; t < T; ++t) {
    step_bytes = std::max(step_bytes, model.tape_bytes[size_t(t)] +
                                          model.backward_transient_bytes[size_t(t)]);
  }
  const InnerDp inner(longest, available, step_bytes, s, per_tape, chunk, single_tape);

  const auto W = size_t(C + 1);
  const auto idx = [&](int64_t i, int64_t j, int64_t c) {
    return (size_t(i) * size_t(N + 1) + size_t(j)) * W + size_t(c);
  };
  std::vector<double> cost(size_t(N + 1) * size_t(N + 1) * W, kInf);
  std::vector<int16_t> choice(cost.size(), -2);  // -1 leaf, 0 inner, k > 0 split at k
  const auto advance_s = [&](int64_t a, int64_t b) {
    return sums.forward_s(a, b) +
           model.op_seconds * double((b - a + kAdvanceChunk - 1) / kAdvanceChunk);
  };
  for (int64_t c = C; c >= 0; --c) {
    for (int64_t len = 1; len <= N; ++len) {
      for (int64_t i = 0; i + len <= N; ++i) {
        const int64_t j = i + len, a = p[size_t(i)], b = p[size_t(j)];
        double best = kInf;
        int16_t how = -2;
        const int64_t room = available - c * s;
        const int64_t leaf_bytes = sums.tape_b(a, b) + sums.backward_transient_b(a, b) +
                                   (b - a >= 2 ? per_tape : single_tape);
        if (leaf_bytes <= room) {
          best = sums.forward_grad_s(a, b) + sums.backward_s(a, b) + 2 * model.op_seconds +
                 model.tape_growth_seconds * double(b - a) * double(b - a);
          how = -1;
        } else if (len == 1) {
          const double recompute = inner.cost(b - a, c);
          if (std::isfinite(recompute)) {
            best = sums.forward_grad_s(a, b) + sums.backward_s(a, b) +
                   recompute / double(b - a) * sums.forward_s(a, b) + 4 * model.op_seconds;
            how = 0;
          }
        }
        if (c < C) {
          for (int64_t k = i + 1; k < j; ++k) {
            const double v = advance_s(a, p[size_t(k)]) + cost[idx(k, j, c + 1)] + cost[idx(i, k, c)];
            if (v < best) {
              best = v;
              how = int16_t(k);
            }
          }
        }
        cost[idx(i, j, c)] = best;
        choice[idx(i, j, c)] = how;
      }
    }
  }
  TORCH_CHECK(std::isfinite(cost[idx(0, N, 0)]), "planner budget: no schedule found within ",
              budget_bytes, " bytes; the minimum is ", minimum_budget(model), " bytes");

  Schedule out;
  out.time_steps = T;
  out.name = fmt::format("dp(budget={})", budget_bytes);
  // Emits [i, j) with c states stored, last to first (recursion depth <= N + inner depth).
  std::function<void(int64_t, int64_t, int64_t)> emit = [&](int64_t i, int64_t j, int64_t c) {
    const int64_t a = p[size_t(i)], b = p[size_t(j)];
    const int16_t how = choice[idx(i, j, c)];
    if (how == -1) {
      out.ops.push_back(Op::forward_grad(a, b));
      out.ops.push_back(Op::backward(a, b));
    } else if (how == 0) {
      inner.emit(a, b - a, c, out.ops);
    } else {
      const int64_t m = p[size_t(how)];
      out.ops.push_back(Op::forward_no_grad(a, m));
      emit(how, j, c + 1);
      out.ops.push_back(Op::free(m));
      emit(i, how, c);
    }
  };
  emit(0, N, 0);
  return out;
}

Plan best_uniform(const CostModel& model, int64_t budget_bytes) {
  const int64_t T = model.time_steps();
  std::vector<int64_t> ks;
  if (T <= 4096) {
    for (int64_t k = 1; k <= T; ++k) ks.push_back(k);
  } else {
    for (int64_t k = 1; k <= 256; ++k) ks.push_back(k);
    for (double k = 256; k < double(T); k *= 1.02) ks.push_back(int64_t(k));
    ks.push_back(T);
  }
  Plan best;
  best.prediction.seconds = kInf;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (int64_t k : ks) {
    auto s = uniform_schedule(T, k);
    const auto p = simulate(s, model);
    smallest = std::min(smallest, p.peak_bytes);
    if (p.peak_bytes <= budget_bytes && p.seconds < best.prediction.seconds) {
      best = {std::move(s), p, "uniform", std::min(k, T)};
    }
  }
  TORCH_CHECK(std::isfinite(best.prediction.seconds), "uniform budget: no block length K fits ",
              budget_bytes, " bytes; the smallest uniform schedule needs ", smallest, " bytes");
  return best;
}

Plan plan(const CostModel& model, int64_t budget_bytes) {
  model.check();
  const int64_t minimum = minimum_budget(model);
  TORCH_CHECK(budget_bytes >= minimum, "planner budget: ", budget_bytes,
              " bytes is below the smallest feasible schedule, which needs ", minimum,
              " bytes (fixed ", model.fixed_bytes, " + one stored state + the largest one-step "
              "tape); raise budget to at least ", minimum);
  const int64_t T = model.time_steps();
  Plan best;
  best.prediction.seconds = kInf;
  const auto consider = [&](Schedule s, const char* by, int64_t parameter = 0) {
    const auto p = simulate(s, model);
    if (p.peak_bytes <= budget_bytes && p.seconds < best.prediction.seconds) {
      best = {std::move(s), p, by, parameter};
    }
  };
  try {
    consider(dp_schedule(model, budget_bytes), "dp");
  } catch (const c10::Error&) {
    // The DP's caps can miss a feasible schedule near the minimum; revolve below covers it.
  }
  try {
    auto u = best_uniform(model, budget_bytes);
    consider(std::move(u.schedule), "uniform", u.parameter);
  } catch (const c10::Error&) {
  }
  // Revolve at every slot count whose recomputation stays reasonable (at most ~T·log T).
  for (int64_t slots = 2; slots <= 64; ++slots) {
    if (binomial_forward_steps(T, slots) > 64 * T) continue;
    consider(revolve_schedule(T, slots), "revolve", slots);
    if (binomial_repetitions(T, slots) <= 1) break;
  }
  if (!std::isfinite(best.prediction.seconds) && T <= 4096) {
    consider(revolve_schedule(T, 1), "revolve", 1);  // quadratic, the last resort
  }
  TORCH_CHECK(std::isfinite(best.prediction.seconds), "planner budget: no schedule found within ",
              budget_bytes, " bytes (the lower bound is ", minimum, " bytes; schedules this close "
              "to it need quadratic recomputation at T = ", T, ")");
  best.schedule.name = fmt::format("planner(budget={}:{})", budget_bytes, best.schedule.name);
  return best;
}

}  // namespace vlrnn::schedule
