// Kept tapes (NOTE [ Kept tapes ], issue 14 part 3): a schedule may keep a tape alive while
// later steps are reversed from its exit state. The validator and the executor accept it,
// gradients stay exact, the simulator prices it, and the planner keeps tapes where the
// budget allows, so that its time falls with the budget down to full BPTT.
// Shapes: T steps; a cost model's bytes and seconds are per step.
#include "test_util.h"

#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/planner.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/schedule/simulator.h"
#include "vlrnn/verify/case.h"

namespace vlrnn::schedule {
namespace {

using testing::expect_error_mentions;
using testing::make_schedule;

// T = 28: keep the tape of [0, 10); reverse [10, 28) from its exit (store state 19, tape
// and back-propagate [19, 28), then [10, 19)); then back-propagate the kept tape.
Schedule kept_schedule() {
  return make_schedule(28, {Op::forward_grad(0, 10), Op::forward_no_grad(10, 19),
                            Op::forward_grad(19, 28), Op::backward(19, 28),
                            Op::forward_grad(10, 19), Op::free(19), Op::backward(10, 19),
                            Op::backward(0, 10)});
}

TEST(KeptTapes, ValidatorAcceptsAForwardFromALiveTapesExit) {
  const auto counts = kept_schedule().validate();
  EXPECT_EQ(counts.kept_tapes, 1);         // [0, 10): state 10 came from its tape
  EXPECT_EQ(counts.forward_no_grad_steps, 9);
  EXPECT_EQ(counts.max_tape_steps, 28 - 9);  // [0, 10) and [19, 28) at once
  EXPECT_EQ(counts.max_stored_states, 1);
  const auto kept = kept_tape_exits(kept_schedule());
  for (int64_t t = 0; t <= 28; ++t) EXPECT_EQ(kept[size_t(t)], t == 10) << t;
  // The uniform schedule stores every entry: no kept tape.
  EXPECT_EQ(uniform_schedule(28, 5).validate().kept_tapes, 0);
}

TEST(KeptTapes, ValidatorRefusesTheExitOfAFreedTape) {
  expect_error_mentions(
      [] {
        make_schedule(4, {Op::forward_grad(0, 2), Op::backward(0, 2), Op::forward_grad(2, 4)})
            .validate();
      },
      {"op [1] backward(0, 2)", "δh at state 2"});
  // The tape of [0, 2) is back-propagated (with δh at 2 from [2, 4)) before state 2 is read
  // again: the exit is gone with it.
  expect_error_mentions(
      [] {
        make_schedule(4, {Op::forward_grad(0, 2), Op::forward_grad(2, 4), Op::backward(2, 4),
                          Op::backward(0, 2), Op::forward_no_grad(2, 3)})
            .validate();
      },
      {"op [4] forward_no_grad(2, 3)", "state 2", "not stored", "live tape"});
}

// A float64 case for run_case: LSTM of 2 layers with dropout between them, h0 and x with
// grad, every sequence T long or the given lengths.
verify::VerifyCase dropout_case(int64_t T, std::vector<int64_t> lengths, const std::string& label) {
  verify::VerifyCase c;
  c.model = "lstm";
  c.num_layers = 2;
  c.dropout = 0.3;
  c.time_steps = T;
  c.method = label;
  if (!lengths.empty()) c.batch = int64_t(lengths.size());
  c.lengths = std::move(lengths);
  return c;
}

// The executor runs kept tapes exactly: float64, dropout, variable lengths, h0 and x with
// grad, against full BPTT.
TEST(KeptTapes, ExecutorMatchesFullBpttExactly) {
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{}, {17, 28, 1, 4}}) {
    const auto c = dropout_case(28, lengths, "kept-tape schedule");
    verify::CaseInjection injection;
    injection.make_method = [](const verify::VerifyCase&) {
      return std::make_unique<ScheduleMethod>("kept", "kept tapes",
                                              [](const Workload&) { return kept_schedule(); });
    };
    const auto outcome = verify::run_case(c, injection);
    EXPECT_TRUE(outcome.passed) << c.name() << ": " << outcome.error << " max_rel "
                                << outcome.diff.max_rel;
    EXPECT_LE(outcome.diff.max_rel, 1e-10) << c.name();
  }
}

TEST(KeptTapes, SimulatorChargesAKeptTapeItsExitState) {
  auto model = CostModel::uniform(28, 1.0, 1.5, 2.5, 1000, 150, 5000);
  const auto p = simulate(kept_schedule(), model);
  // At forward_grad(19, 28): fixed + the kept tape [0, 10) + its exit state + stored
  // state 19 + the tape [19, 28) (this model has no per-tape or backward bytes).
  EXPECT_EQ(p.peak_bytes, 5000 + 10 * 1000 + 150 + 150 + 9 * 1000);
  EXPECT_DOUBLE_EQ(p.seconds, 9 * 1.0 + 28 * 1.5 + 28 * 2.5);
}

// The simulator's peak for a kept-tape schedule is as close to the measured one as for the
// others (tests/schedule/test_schedule.cpp: within 10 % on fixed lengths).
TEST(KeptTapes, SimulatorPredictsTheMeasuredPeak) {
  testing::SmallProblem problem("lstm", 28, 4, torch::kFloat32);  // inputs [28, 4, 3]
  auto model = make_model({"lstm", 3, 16, 1});
  auto head = make_head("ce", 16, 3);
  const Workload w{*model, *head, problem.batch};
  const auto cost = measure_cost_model(validated(w));
  const auto s = kept_schedule();
  const auto predicted = simulate(s, cost);
  ScheduleMethod method("kept", s.name, [&s](const Workload&) { return s; });
  const auto measured = measure::measure_iteration(method, w, torch::kCPU);
  const double error = double(predicted.peak_bytes - measured.memory.iteration_peak_bytes) /
                       double(measured.memory.iteration_peak_bytes);
  std::printf("[kept tapes] peak predicted %lld measured %lld (%+.1f%%)\n",
              (long long)predicted.peak_bytes, (long long)measured.memory.iteration_peak_bytes,
              100 * error);
  EXPECT_LE(std::abs(error), 0.10);
}

// Rotor's case for keeping a tape: the first half of the chain is dear to advance and
// tapes little (a heavy encoder-like part), the second half is cheap and tapes a lot.
// Storing states must re-advance the dear half; keeping its tapes does not.
CostModel dear_first_half(int64_t T) {
  auto m = CostModel::uniform(T, 1.0, 1.2, 2.0, 1000, 100, 5000);
  for (int64_t t = 0; t < T / 2; ++t) {
    m.step.forward_seconds[size_t(t)] = 10.0;
    m.step.forward_grad_seconds[size_t(t)] = 12.0;
    m.step.backward_seconds[size_t(t)] = 20.0;
    m.step.tape_bytes[size_t(t)] = 200;
  }
  m.call.op_seconds = 0.01;
  m.check();
  return m;
}

TEST(KeptTapes, PlannerKeepsTapesWhenTheyPay) {
  for (const int64_t T : {int64_t(100), int64_t(1000)}) {
    const auto model = dear_first_half(T);
    const auto full = simulate(uniform_schedule(T, T), model);
    const auto budget = full.peak_bytes / 3;
    const auto dp = simulate(dp_schedule(model, budget), model);
    const auto states_only = simulate(dp_schedule(model, budget, false), model);
    EXPECT_GT(dp.counts.kept_tapes, 0) << "T=" << T;
    EXPECT_LE(dp.peak_bytes, budget) << "T=" << T;
    // A third of full's bytes holds the dear half's tapes: it is never re-advanced.
    EXPECT_LT(dp.seconds, 0.9 * states_only.seconds) << "T=" << T;
    const auto planned = plan(model, budget);
    EXPECT_LE(planned.prediction.seconds, dp.seconds * (1 + 1e-12)) << "T=" << T;
    EXPECT_GT(planned.prediction.counts.kept_tapes, 0) << "T=" << T;
    EXPECT_LE(planned.prediction.peak_bytes, budget) << "T=" << T;
  }
}

// The DP's own accounting is conservative against the simulator's at every budget, with
// kept tapes and with states only, on chains with every kind of byte the cost model has:
// a later backward's bytes larger than a longer tape's sums (as measured on small models: the
// inner DP once took a one-step tape's for the smaller), backward transients, advance chunks.
TEST(KeptTapes, DpScheduleFitsEveryBudget) {
  for (const int64_t T : {int64_t(37), int64_t(300)}) {
    auto model = dear_first_half(T);
    for (int64_t t = 0; t < T; ++t) {
      model.step.backward_transient_bytes[size_t(t)] = 300 + 7 * (t % 5);
      model.step.advance_transient_bytes[size_t(t)] = 50;
      model.step.state_bytes[size_t(t + 1)] = 400 + (t % 3);
    }
    model.backward.sums_bytes = 64;
    model.backward.later_bytes = 5000;
    model.iteration.gradient_bytes = 4000;
    model.check();
    const auto full = simulate(uniform_schedule(T, T), model);
    const auto minimum = minimum_budget(model);
    for (const bool keep_tapes : {true, false}) {
      int64_t kept = 0;
      for (int64_t step = 0; step <= 16; ++step) {
        const auto budget = minimum + (full.peak_bytes - minimum) * step / 16;
        try {
          const auto p = simulate(dp_schedule(model, budget, keep_tapes), model);
          EXPECT_LE(p.peak_bytes, budget) << "T=" << T << " budget " << budget << " keep "
                                          << keep_tapes;
          kept += p.counts.kept_tapes;
        } catch (const c10::Error&) {
          // Near the minimum the DP's caps may find nothing; plan() falls back to revolve.
        }
      }
      EXPECT_EQ(kept > 0, keep_tapes) << "T=" << T;
    }
  }
}

// From the smallest budget to full's peak, the planner's predicted time never rises as the
// budget grows, and at full's peak it is full BPTT: no recomputation.
TEST(KeptTapes, PlannerTimeFallsWithTheBudgetDownToFullBptt) {
  for (const int64_t T : {int64_t(60), int64_t(300)}) {
    const auto model = dear_first_half(T);
    const auto full = simulate(uniform_schedule(T, T), model);
    const auto minimum = minimum_budget(model);
    double previous = std::numeric_limits<double>::infinity();
    for (int64_t step = 0; step <= 24; ++step) {
      const auto budget = minimum + (full.peak_bytes - minimum) * step / 24;
      const auto planned = plan(model, budget);
      EXPECT_LE(planned.prediction.peak_bytes, budget) << "T=" << T << " budget " << budget;
      EXPECT_LE(planned.prediction.seconds, previous * (1 + 1e-12))
          << "T=" << T << " budget " << budget << ": " << planned.schedule.name;
      previous = planned.prediction.seconds;
    }
    const auto at_full = plan(model, full.peak_bytes);
    EXPECT_EQ(at_full.prediction.counts.forward_no_grad_steps, 0) << "T=" << T;
    EXPECT_DOUBLE_EQ(at_full.prediction.seconds, full.seconds) << "T=" << T;
  }
}

// What the planner chose and measured, kept after the case has dropped the method.
struct PlanReport {
  std::string schedule;
  int64_t kept_tapes = -1, checked_peak = 0, budget = 0;
};

// The planner at 75 % of full's peak, planning with the workload's measured bytes and the
// seconds of dear_first_half (so that keeping tapes pays): the budget still caps the
// measured peak.
class DearFirstHalfPlanner : public GradientMethod {
 public:
  explicit DearFirstHalfPlanner(std::shared_ptr<PlanReport> report) : report_(std::move(report)) {}
  std::string name() const override { return "planner"; }
  std::string describe() const override { return "planner(75% of full, dear first half)"; }

 protected:
  GradientResult compute_impl(const Workload& workload) override {
    if (!planner_) {
      auto model = measured_cost_model(workload);
      // Seconds as dear_first_half's (measured ones vary with the machine's load and
      // would make the choice flaky); bytes as measured, which the budget is about.
      const auto dear = dear_first_half(model.time_steps());
      model.step.forward_seconds = dear.step.forward_seconds;
      model.step.forward_grad_seconds = dear.step.forward_grad_seconds;
      model.step.backward_seconds = dear.step.backward_seconds;
      model.call.op_seconds = dear.call.op_seconds;
      model.call.tape_growth_seconds = 0.0;
      PlannerOptions options;
      options.budget_percent = 75;
      options.cost_model = model;
      planner_ = std::make_unique<PlannerMethod>(options);
    }
    auto result = planner_->compute(workload);
    const auto& chosen = planner_->current_plan();
    *report_ = {chosen.schedule.name, chosen.prediction.counts.kept_tapes,
                planner_->checked_peak_bytes(), planner_->checked_budget_bytes()};
    return result;
  }

 private:
  std::shared_ptr<PlanReport> report_;
  std::unique_ptr<PlannerMethod> planner_;
};

// The planner method with kept tapes, on measured workloads: gradients equal full BPTT's
// (float64, dropout, variable lengths) and the measured peak is within the budget.
TEST(KeptTapes, PlannerMethodWithKeptTapesIsExactAndWithinBudget) {
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{}, {40, 60, 1, 4}}) {
    const auto c = dropout_case(60, lengths, "planner:percent=75 (dear first half)");
    const auto report = std::make_shared<PlanReport>();
    verify::CaseInjection injection;
    injection.make_method = [report](const verify::VerifyCase&) {
      return std::make_unique<DearFirstHalfPlanner>(report);
    };
    const auto outcome = verify::run_case(c, injection);
    EXPECT_TRUE(outcome.passed) << c.name() << ": " << outcome.error << " max_rel "
                                << outcome.diff.max_rel;
    EXPECT_LE(outcome.diff.max_rel, 1e-10) << c.name();
    std::printf("[kept tapes] %s: %s, %lld kept tapes, peak %lld of budget %lld\n",
                c.name().c_str(), report->schedule.c_str(), (long long)report->kept_tapes,
                (long long)report->checked_peak, (long long)report->budget);
    EXPECT_GT(report->kept_tapes, 0) << c.name();
    EXPECT_LE(report->checked_peak, report->budget) << c.name();
  }
}

}  // namespace
}  // namespace vlrnn::schedule
