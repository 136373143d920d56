#include "vlrnn/schedule/planner.h"

#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace vlrnn::schedule {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The inner DP's split candidates for l steps (NOTE [ Planner DP ]): every split within
// kExactSplits steps of the front, where the best split of a short reversal lies, and
// kSplitGrid - 1 evenly spaced over the rest, so an entry costs a few dozen candidates
// rather than l.
constexpr int64_t kExactSplits = 16, kSplitGrid = 64;
// The per-call seconds charged for reversing one super-step with the inner DP, in calls over
// the whole super-step: the inner DP counts recomputed steps, not calls, so a fixed few
// stand for its advances, tapes and backward calls (a whole tape is two). The simulator
// prices the chosen schedule's calls exactly; this weighs only the DP's choice.
constexpr int64_t kInnerReversalCalls = 4;
// best_uniform tries every K on a chain of at most kEveryUniformK steps; on a longer one,
// every K up to kDenseUniformK, then K growing by kUniformKGrowth (2 %): about 560
// candidates at T = 1e5, each a simulation.
constexpr int64_t kEveryUniformK = 4096;
constexpr int64_t kDenseUniformK = 256;
constexpr double kUniformKGrowth = 1.02;
// Where nothing else fits, revolve with one slot (T²/2 steps recomputed) on a chain of at
// most this many steps.
constexpr int64_t kLongestQuadraticChain = 4096;

int64_t max_of(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t m = 0;
  for (size_t i = from; i < v.size(); ++i) m = std::max(m, v[i]);
  return m;
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
      capacity_[size_t(c)] = capacity(available - c * state_bytes, max_length, step_bytes,
                                      per_tape_bytes, single_tape_bytes);
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
        for (int64_t y = 1; y <= std::min<int64_t>(kExactSplits, l - 1); ++y) consider(y);
        for (int64_t j = 1; j < kSplitGrid; ++j) consider((l * j + kSplitGrid - 1) / kSplitGrid);
        consider(l - capacity_[size_t(c + 1)]);
        at(l, c) = best;
        split_at(l, c) = best_y;
      }
    }
  }
  double cost(int64_t l, int64_t c) const { return c > states_ ? kInf : cost_[index(l, c)]; }
  // The longest L such that a tape of every length 1..L fits `room` bytes: a one-step tape
  // has its own per-call bytes (cost_model.h), larger than a longer one's on small models
  // (its gradient sums are not handed over), so both are checked.
  static int64_t capacity(int64_t room, int64_t max_length, int64_t step_bytes,
                          int64_t per_tape_bytes, int64_t single_tape_bytes) {
    if (room - single_tape_bytes - step_bytes < 0) return 0;
    const int64_t longer = room - per_tape_bytes;
    const int64_t most = longer < 0        ? 0
                         : step_bytes <= 0 ? max_length
                                           : std::min(max_length, longer / step_bytes);
    return most >= 2 ? most : 1;
  }
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

// The most one step adds to a tape and to its backward transient, over the chain: what a
// tape of k steps needs beyond its per-tape bytes is at most k of these (its window's buffer
// at most one step's worth per step: NOTE [ Backward windows ]). A step's transient with
// the head's signed part counts from 0, as a tape's does (CostPrefix::tape_transient_b).
int64_t largest_step_bytes(const CostModel& model) {
  int64_t largest = 0;
  for (size_t t = 0; t < model.step.tape_bytes.size(); ++t) {
    largest = std::max(largest, model.step.tape_bytes[t] +
                                    std::max<int64_t>(0, model.step.backward_transient_bytes[t] +
                                                             model.backward.head_step_bytes +
                                                             model.backward.window_step_bytes));
  }
  return largest;
}

// What an advance adds to the fixed bytes and gradients at most: its largest chunk over
// [0, T), less what only reversing a tape holds (reversal_bytes), as the simulator charges it.
int64_t advance_bound(const CostModel& model) {
  const int64_t advance = model.advance_transient(0, model.time_steps(), kAdvanceChunk);
  return std::max<int64_t>(0, advance - model.iteration.reversal_bytes);
}

}  // namespace

int64_t minimum_budget(const CostModel& model) {
  model.check();
  const int64_t worst_step =
      largest_step_bytes(model) + CostPrefix(model).per_tape_transient_bound(true);
  // Reversing any step but step 0 needs its entry stored; an advance stores its end.
  const int64_t state = model.time_steps() > 1 ? max_of(model.step.state_bytes, 1) : 0;
  // The quadratic schedule: one state stored, one-step tapes, a second backward's sums.
  return model.iteration.fixed_bytes + model.iteration.gradient_bytes +
         std::max(advance_bound(model) + state,
                  state + worst_step +
                      (model.time_steps() > 1 ? model.backward.call_bytes(1, true) : 0));
}

namespace {

// The top-level DP's inputs (NOTE [ Planner DP ]): the super-steps and what tapes and stored
// states may use, counted in memory units. An advance's transient (its largest chunk) meets
// stored states and kept tapes, never a tape being reversed: storing a state with m units
// held needs (m + 1)·u + advance <= available, reversing a tape with m units held needs
// m·u + tape + transient <= available. Parameter gradients and the sums of later backward
// calls are charged throughout (conservative: they only exist from the first backward on).
struct DpChain {
  int64_t T = 0, N = 0;        // steps, super-steps
  std::vector<int64_t> p;      // [N + 1] super-step boundaries
  int64_t state = 1;           // s: the largest stored state
  int64_t per_tape = 0;        // a tape of >= 2 steps, whatever its length
  int64_t single_tape = 0;     // a one-step tape
  // The least a tape of >= 2 steps reversed after the first needs beyond its steps (NOTE [ A
  // later backward's floor ]): the leaf check and the inner DP take the larger of it and the
  // per-tape bytes with the tape's transient.
  int64_t floor_tape = 0;
  int64_t available = 0;          // budget less fixed bytes and parameter gradients
  int64_t advance_transient = 0;  // the largest advance chunk's transient (advance_bound)
  int64_t unit = 1;            // u: bytes per memory unit, >= s (one state = one unit)
  int64_t max_units = 0;       // M: units that stored states and kept tapes may hold
  bool keep_tapes = true;      // whether the DP may keep tapes (NOTE [ Kept tapes ])
  int64_t longest = 0;         // the longest super-step
  int64_t step_bytes = 0;      // the largest step's tape + backward transient
};

DpChain make_chain(const CostModel& model, int64_t budget_bytes, bool keep_tapes) {
  DpChain d;
  d.T = model.time_steps();
  d.N = std::min(d.T, keep_tapes ? kMaxKeptSuperSteps : kMaxSuperSteps);
  d.p.resize(size_t(d.N + 1));
  for (int64_t i = 0; i <= d.N; ++i) d.p[size_t(i)] = i * d.T / d.N;  // equal step counts
  d.state = std::max<int64_t>(1, max_of(model.step.state_bytes, 1));
  d.per_tape = model.backward.call_bytes(2, true);
  d.single_tape = model.backward.call_bytes(1, true);
  d.floor_tape = model.backward.floor_bytes;
  d.available = budget_bytes - model.iteration.fixed_bytes - model.iteration.gradient_bytes;
  d.advance_transient = advance_bound(model);
  TORCH_CHECK(d.available > 0, "planner budget: ", budget_bytes, " bytes leave nothing for "
              "tapes and states (fixed bytes ", model.iteration.fixed_bytes, "); the minimum is ",
              minimum_budget(model), " bytes");
  d.keep_tapes = keep_tapes;
  if (keep_tapes) {
    d.unit = std::max(d.state, (d.available + kMaxMemoryUnits - 1) / kMaxMemoryUnits);
    d.max_units = std::min(d.available / d.unit, kMaxMemoryUnits);
  } else {  // states only: a unit is a state, and no more than one per super-step boundary
    d.unit = d.state;
    d.max_units = std::max<int64_t>(
        0, std::min({d.N - 1, (d.available - d.advance_transient) / d.state, kMaxStates}));
  }
  for (int64_t i = 0; i < d.N; ++i) {
    d.longest = std::max(d.longest, d.p[size_t(i + 1)] - d.p[size_t(i)]);
  }
  d.step_bytes = largest_step_bytes(model);
  return d;
}

// C(i, j, m) of NOTE [ Planner DP ] over the super-steps, filled for every m from the most
// units down, and the schedule it chose.
class OuterDp {
 public:
  OuterDp(const CostModel& model, const DpChain& d)
      : model_(model), d_(d), sums_(model),
        // The inner DP bounds a tape by its steps (largest_step_bytes) and what it adds once.
        inner_(d.longest, d.available, d.step_bytes, d.state,
               std::max(d.per_tape, d.floor_tape) + sums_.per_tape_transient_bound(false),
               d.advance_transient,
               d.single_tape + sums_.per_tape_transient_bound(true)),
        ranges_(size_t((d.N + 1) * (d.N + 2) / 2)),
        cost_(ranges_ * size_t(d.max_units + 1), kInf),
        choice_(cost_.size(), kNone) {
    // What a range costs whatever the units held, once per range rather than per level.
    leaf_bytes_.resize(ranges_);
    leaf_s_.resize(ranges_);
    advance_s_.resize(ranges_);
    kept_units_.resize(ranges_);
    for (int64_t j = 1; j <= d.N; ++j) {
      for (int64_t i = 0; i < j; ++i) {
        const int64_t a = d.p[size_t(i)], b = d.p[size_t(j)];
        const size_t r = range(i, j);
        leaf_bytes_[r] = sums_.tape_b(a, b) +
                         (b - a >= 2 ? std::max(sums_.tape_transient_b(a, b) + d.per_tape,
                                                d.floor_tape + sums_.tape_transient_b(
                                                                   a, a + kFloorTapeSteps))
                                     : sums_.tape_transient_b(a, b) + d.single_tape);
        leaf_s_[r] = sums_.forward_grad_s(a, b) + sums_.backward_s(a, b) +
                     2 * model.calls_seconds(a, b, b - a) +
                     model.call.tape_growth_seconds * double(b - a) * double(b - a);
        advance_s_[r] = sums_.forward_s(a, b) + model.calls_seconds(a, b, kAdvanceChunk);
        // A kept tape: its steps, its exit as a stored state and its own bytes.
        const int64_t kept = sums_.tape_b(a, b) + d.state + model.call.kept_tape_bytes;
        kept_units_[r] = (kept + d.unit - 1) / d.unit;
      }
    }
    for (int64_t m = d.max_units; m >= 0; --m) {
      for (int64_t len = 1; len <= d.N; ++len) {
        for (int64_t i = 0; i + len <= d.N; ++i) fill(i, i + len, m);
      }
    }
  }
  bool feasible() const { return std::isfinite(cost_[idx(0, d_.N, 0)]); }
  // Emits [i, j) with m units held, last to first (recursion depth <= N + inner depth).
  void emit(int64_t i, int64_t j, int64_t m, std::vector<Op>& ops) const {
    const int64_t a = d_.p[size_t(i)], b = d_.p[size_t(j)];
    const int16_t how = choice_[idx(i, j, m)];
    if (how == kLeaf) {
      ops.push_back(Op::forward_grad(a, b));
      ops.push_back(Op::backward(a, b));
    } else if (how == kInner) {
      inner_.emit(a, b - a, inner_states(m), ops);
    } else if (how <= d_.N) {  // store the state at super-step `how`
      const int64_t mid = d_.p[size_t(how)];
      ops.push_back(Op::forward_no_grad(a, mid));
      emit(how, j, m + 1, ops);
      ops.push_back(Op::free(mid));
      emit(i, how, m, ops);
    } else {  // keep the tape of [i, k) (NOTE [ Kept tapes ])
      const int64_t k = how - d_.N, mid = d_.p[size_t(k)];
      ops.push_back(Op::forward_grad(a, mid));
      emit(k, j, m + kept_units_[range(i, k)], ops);
      ops.push_back(Op::backward(a, mid));
    }
  }

 private:
  static constexpr int16_t kNone = -2, kLeaf = -1, kInner = 0;  // k > 0: split; N + k: keep
  // Unit level first: filling level m reads levels m and m + 1 only, two slices of
  // (N + 1)(N + 2)/2 entries that stay in the cache. With ranges first the reads jumped
  // across the whole table: the DP with states only (N = 128, M = 127, a 1000-step LSTM)
  // took 0.47 s, level first 0.25 s, and 0.09 s with each range's costs computed once
  // (leaf_bytes_ ...), the same schedules.
  size_t idx(int64_t i, int64_t j, int64_t m) const {
    return size_t(m) * ranges_ + range(i, j);
  }
  static size_t range(int64_t i, int64_t j) { return size_t(j * (j + 1) / 2 + i); }
  double at(int64_t i, int64_t j, int64_t m) const {
    return m > d_.max_units ? kInf : cost_[idx(i, j, m)];
  }
  // The inner DP counts states: m units hold at most this many states' bytes.
  int64_t inner_states(int64_t m) const { return (m * d_.unit + d_.state - 1) / d_.state; }
  // Whether super-steps [i, j) can be taped whole and reversed with m units held, plus
  // `extra` bytes (a kept tape's exit state, charged until the tape is back-propagated).
  bool leaf_fits(int64_t i, int64_t j, int64_t m, int64_t extra = 0) const {
    return leaf_bytes_[range(i, j)] + extra <= d_.available - m * d_.unit;
  }
  void fill(int64_t i, int64_t j, int64_t m);

  const CostModel& model_;
  const DpChain& d_;
  const CostPrefix sums_;
  const InnerDp inner_;
  const size_t ranges_;  // (N + 1)(N + 2)/2: the ranges [i, j) of super-steps, i <= j
  // Per range of super-steps [i, j) (index range(i, j)): taping it whole and reversing
  // it, its bytes and seconds; advancing over it; keeping its tape, in units.
  std::vector<int64_t> leaf_bytes_, kept_units_;
  std::vector<double> leaf_s_, advance_s_;
  std::vector<double> cost_;     // [M + 1][(N + 1)(N + 2) / 2 ranges i <= j]
  std::vector<int16_t> choice_;  // kNone, kLeaf, kInner, a split k or a kept tape N + k
};

// The choices for [i, j) with m units held: tape it whole (leaf), reverse its one super-step
// with the inner DP, advance to a split k and store the state there (k), or keep the tape
// of [i, k) while [k, j) is reversed from its exit (N + k).
void OuterDp::fill(int64_t i, int64_t j, int64_t m) {
  const int64_t a = d_.p[size_t(i)], b = d_.p[size_t(j)];
  double best = kInf;
  int16_t how = kNone;
  if (leaf_fits(i, j, m)) {
    best = leaf_s_[range(i, j)];
    how = kLeaf;
  } else if (j - i == 1 && std::isfinite(inner_.cost(b - a, inner_states(m)))) {
    best = sums_.forward_grad_s(a, b) + sums_.backward_s(a, b) +
           inner_.cost(b - a, inner_states(m)) / double(b - a) * sums_.forward_s(a, b) +
           double(kInnerReversalCalls) * model_.calls_seconds(a, b, b - a);
    how = kInner;
  }
  const bool may_store = (m + 1) * d_.unit + d_.advance_transient <= d_.available;
  bool may_keep = d_.keep_tapes;
  for (int64_t k = i + 1; k < j && (may_store || may_keep); ++k) {
    const int64_t mid = d_.p[size_t(k)];
    if (may_store) {
      const double v = advance_s_[range(i, k)] + at(k, j, m + 1) + at(i, k, m);
      if (v < best) {
        best = v;
        how = int16_t(k);
      }
    }
    // A longer kept tape holds more bytes: once one of >= 2 steps (past the one-step
    // tape's smaller per-call bytes) cannot be reversed, no longer one can.
    if (may_keep && !leaf_fits(i, k, m, d_.state)) {
      may_keep = mid - a < 2;
    } else if (may_keep) {
      // Every step of [mid, b) is taped and back-propagated once while it lives.
      const double v = leaf_s_[range(i, k)] + at(k, j, m + kept_units_[range(i, k)]) +
                       model_.call.tape_growth_seconds * 2 * double(mid - a) * double(b - mid);
      if (v < best) {
        best = v;
        how = int16_t(d_.N + k);
      }
    }
  }
  cost_[idx(i, j, m)] = best;
  choice_[idx(i, j, m)] = how;
}

}  // namespace

Schedule dp_schedule(const CostModel& model, int64_t budget_bytes, bool keep_tapes) {
  model.check();
  const DpChain chain = make_chain(model, budget_bytes, keep_tapes);
  const OuterDp dp(model, chain);
  TORCH_CHECK(dp.feasible(), "planner budget: no schedule found within ", budget_bytes,
              " bytes; the minimum is ", minimum_budget(model), " bytes");
  Schedule out;
  out.time_steps = chain.T;
  out.name = fmt::format("dp(budget={}{})", budget_bytes, keep_tapes ? "" : ",states only");
  dp.emit(0, chain.N, 0, out.ops);
  return out;
}

Plan best_uniform(const CostModel& model, int64_t budget_bytes) {
  const int64_t T = model.time_steps();
  std::vector<int64_t> ks;
  if (T <= kEveryUniformK) {
    for (int64_t k = 1; k <= T; ++k) ks.push_back(k);
  } else {
    for (int64_t k = 1; k <= kDenseUniformK; ++k) ks.push_back(k);
    for (double k = kDenseUniformK; k < double(T); k *= kUniformKGrowth) ks.push_back(int64_t(k));
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
              " bytes (fixed ", model.iteration.fixed_bytes,
              " + one stored state + the largest one-step tape); raise budget to at least ",
              minimum);
  const int64_t T = model.time_steps();
  Plan best;
  best.prediction.seconds = kInf;
  const auto consider = [&](Schedule s, const char* by, int64_t parameter = 0) {
    const auto p = simulate(s, model);
    if (p.peak_bytes <= budget_bytes && p.seconds < best.prediction.seconds) {
      best = {std::move(s), p, by, parameter};
    }
  };
  // The DP with kept tapes, and with states only: where memory units are coarser than a
  // state (large budgets), the second charges states exactly (NOTE [ Planner DP ]).
  for (const bool keep_tapes : {true, false}) {
    try {
      consider(dp_schedule(model, budget_bytes, keep_tapes), keep_tapes ? "dp" : "dp (states)");
    } catch (const c10::Error&) {
      // The DP's caps can miss a feasible schedule near the minimum; revolve below covers it.
    }
  }
  try {
    auto u = best_uniform(model, budget_bytes);
    consider(std::move(u.schedule), "uniform", u.parameter);
  } catch (const c10::Error&) {
  }
  for (const int64_t slots : revolve_slot_counts(T)) {
    consider(revolve_schedule(T, slots), "revolve", slots);
  }
  if (!std::isfinite(best.prediction.seconds) && T <= kLongestQuadraticChain) {
    consider(revolve_schedule(T, 1), "revolve", 1);  // quadratic, the last resort
  }
  TORCH_CHECK(std::isfinite(best.prediction.seconds), "planner budget: no schedule found within ",
              budget_bytes, " bytes (the lower bound is ", minimum, " bytes; schedules this close "
              "to it need quadratic recomputation at T = ", T, ")");
  best.schedule.name = fmt::format("planner(budget={}:{})", budget_bytes, best.schedule.name);
  return best;
}

}  // namespace vlrnn::schedule
