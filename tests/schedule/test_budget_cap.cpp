// A memory budget is a promise (issue 17): over random models, length distributions and
// budgets, the planner's measured iteration peak never exceeds its budget; a budget it cannot
// honour is refused, naming the smallest it can — and that one it honours.
// Shapes: T steps, B sequences, F input features, H hidden.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"

#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/schedule/simulator.h"

#include <cmath>
#include <random>

namespace vlrnn::schedule {
namespace {

using testing::expect_error_mentions;

struct RandomWorkload {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;
  std::string name;
  Workload workload() const { return Workload{*model, *head, batch}; }
};

// One model kind of F inputs and H hidden, a head with C outputs (ce: classes; else mse),
// random inputs [T, B, F] and targets.
RandomWorkload fixed_workload(const std::string& kind, int64_t F, int64_t H, int64_t T,
                              int64_t B, bool ce, int64_t C) {
  RandomWorkload w;
  w.model = make_model({kind, F, H, 1});
  w.head = make_head(ce ? "ce" : "mse", H, C);
  w.batch.inputs = torch::randn({T, B, F});                                      // [T, B, F]
  w.batch.targets = ce ? torch::randint(0, C, {T, B}, torch::kLong) : torch::randn({T, B, C});
  w.name = kind;
  return w;
}

// Every model kind the planner plans for: on a bidirectional one it runs bivlrnn under the
// budget instead (tested in tests/schedule/test_bidirectional_vlrnn.cpp).
std::vector<std::string> left_to_right_kinds() {
  std::vector<std::string> kinds;
  for (const auto& kind : model_kinds()) {
    if (!is_bidirectional_kind(kind)) kinds.push_back(kind);
  }
  return kinds;
}

// Small enough for CI: T <= 96, B <= 6, H <= 24, at most 2 layers.
RandomWorkload draw_workload(std::mt19937_64& rng) {
  const auto range = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const auto kinds = left_to_right_kinds();
  const std::string kind = kinds[size_t(range(0, int64_t(kinds.size()) - 1))];
  const int64_t layers = kind == "gru_lstm" ? 1 : range(1, 2);
  const double dropout = (layers > 1 || kind == "gru_lstm") && range(0, 1) ? 0.2 : 0.0;
  const int64_t F = range(2, 8), H = range(4, 24), B = range(1, 6), T = range(8, 96);
  const auto dtype = range(0, 1) ? torch::kFloat32 : torch::kFloat64;
  const bool ce = range(0, 1) == 1;
  RandomWorkload w;
  w.model = make_model({kind, F, H, layers, dropout});
  w.model->to(dtype);
  w.head = make_head(ce ? "ce" : "mse", w.model->output_size(), ce ? 3 : 2);
  w.head->to(dtype);
  w.batch.inputs = torch::randn({T, B, F}, torch::dtype(dtype));  // [T, B, F]
  if (range(0, 1)) w.batch.inputs.requires_grad_(true);
  w.batch.targets = ce ? torch::randint(0, 3, {T, B}, torch::kLong)           // [T, B]
                       : torch::randn({T, B, 2}, torch::dtype(dtype));        // [T, B, 2]
  // Lengths: all T; variable with T present; variable, all ending before T.
  const int64_t mode = range(0, 2);
  std::string lengths = "fixed";
  if (mode > 0) {
    const int64_t top = mode == 1 ? T : range(T / 2, T - 1);
    std::vector<int64_t> l(static_cast<size_t>(B));
    for (auto& v : l) v = range(std::max<int64_t>(1, top / 5), top);
    if (mode == 1) l[size_t(range(0, B - 1))] = T;
    w.batch.lengths = torch::tensor(l, torch::kLong);  // [B]
    lengths = mode == 1 ? "var" : "tail";
  }
  w.name = fmt::format("{}x{}{} F={} H={} B={} T={} {} {} {}{}", kind, layers,
                       dropout > 0 ? "+drop" : "", F, H, B, T, ce ? "ce" : "mse",
                       c10::toString(dtype), lengths,
                       w.batch.inputs.requires_grad() ? " x=grad" : "");
  return w;
}

// The property: for every drawn workload and budget (log-uniform between 90 % of the
// smallest schedule's predicted peak and full BPTT's), the planner either runs within the
// budget, measured, or refuses it naming a larger smallest budget. Never over.
TEST(BudgetCap, MeasuredPeakNeverExceedsTheBudgetOnRandomWorkloads) {
  std::mt19937_64 rng(17);
  int64_t ran = 0, refused = 0;
  const int64_t cases = 40;
  for (int64_t i = 0; i < cases; ++i) {
    torch::manual_seed(uint64_t(100 + i));
    const auto w = draw_workload(rng);
    const auto model = measured_cost_model(validated(w.workload()));
    const int64_t T = model.time_steps();
    const double full = double(simulate(uniform_schedule(T, T), model).peak_bytes);
    const double low = 0.9 * double(minimum_budget(model));
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto budget = int64_t(low * std::pow(std::max(1.0, full / low), u));
    PlannerOptions options;
    options.budget_bytes = budget;
    PlannerMethod planner(options);
    try {
      const auto step = measure::measure_iteration(planner, w.workload(), torch::kCPU);
      EXPECT_LE(step.memory.iteration_peak_bytes, budget) << w.name << " planned "
                                                     << planner.current_plan().schedule.name;
      std::printf("[budget cap] %s: budget %lld measured %lld (%.1f%%), margin %.1f%%\n",
                  w.name.c_str(), (long long)budget, (long long)step.memory.iteration_peak_bytes,
                  100.0 * double(step.memory.iteration_peak_bytes) / double(budget),
                  100.0 * planner.margin());
      ++ran;
    } catch (const c10::Error& e) {
      const std::string message = e.what_without_backtrace();
      EXPECT_NE(message.find("smallest budget"), std::string::npos) << w.name << ": " << message;
      const auto at = message.find("raise budget to at least ");
      if (at != std::string::npos) {
        EXPECT_GT(std::stoll(message.substr(at + 25)), budget) << w.name << ": " << message;
      }
      std::printf("[budget cap] %s: budget %lld refused\n", w.name.c_str(), (long long)budget);
      ++refused;
    }
  }
  std::printf("[budget cap] %lld ran within budget, %lld refused\n", (long long)ran,
              (long long)refused);
  EXPECT_GE(ran, cases / 2);  // most budgets are drawn above the minimum: most must run
}

// percent=P: the budget is P % of full BPTT's peak on this very batch (variable lengths
// included), and the measured peak lands at or under it.
TEST(BudgetCap, PercentIsOfThisBatchsFullBptt) {
  for (const bool variable : {false, true}) {
  torch::manual_seed(11);
  auto problem = fixed_workload("lstm", 8, 32, 200, 6, true, 5);
  if (variable) problem.batch.lengths = torch::tensor({200, 41, 160, 97, 133, 58}, torch::kLong);
  const Workload workload = problem.workload();
  auto full = make_method("full");
  const int64_t full_peak = measure::measure_iteration(*full, workload, torch::kCPU)
                                .memory.iteration_peak_bytes;
  for (double percent : {20.0, 50.0}) {
    PlannerOptions options;
    options.budget_percent = percent;
    PlannerMethod planner(options);
    const auto step = measure::measure_iteration(planner, workload, torch::kCPU);
    const double budget = double(full_peak) * percent / 100.0;
    std::printf("[budget cap] %s percent=%g: full %lld, budget %lld, measured %lld (%.1f%%)\n",
                variable ? "var" : "fixed", percent, (long long)full_peak,
                (long long)planner.checked_budget_bytes(), (long long)step.memory.iteration_peak_bytes,
                100.0 * double(step.memory.iteration_peak_bytes) / double(full_peak));
    EXPECT_LE(double(step.memory.iteration_peak_bytes), budget)
        << (variable ? "variable" : "fixed") << " lengths, percent=" << percent;
  }
  }
}

// percent=P on every model kind, fixed and variable lengths: at or under P % of full's
// measured peak. lstm_block runs at H = 256, B = 64 and T = 200, past its backward chunk
// of 64 steps, where its backward transient stops growing (NOTE [ A transient that stops
// growing ]): a cost model that extrapolated it set the budget ~1.5x too large there.
TEST(BudgetCap, PercentHoldsOnEveryModelKind) {
  for (const auto& kind : left_to_right_kinds()) {
    for (const bool variable : {false, true}) {
      torch::manual_seed(23);
      const bool chunked = kind == "lstm_block";
      const int64_t H = chunked ? 256 : 64, B = chunked ? 64 : 8, T = chunked ? 200 : 150;
      auto problem = fixed_workload(kind, 4, H, T, B, true, 3);
      if (variable) {
        problem.batch.lengths = torch::randint(T / 5, T + 1, {B}, torch::kLong);  // [B]
        problem.batch.lengths[0] = T;
      }
      const Workload workload = problem.workload();
      auto full = make_method("full");
      const int64_t full_peak =
          measure::measure_iteration(*full, workload, torch::kCPU).memory.iteration_peak_bytes;
      for (const double percent : {10.0, 40.0}) {
        PlannerOptions options;
        options.budget_percent = percent;
        PlannerMethod planner(options);
        const auto step = measure::measure_iteration(planner, workload, torch::kCPU);
        const int64_t peak = step.memory.iteration_peak_bytes;
        std::printf("[budget cap] %s %s percent=%g: %.1f%% of full's %lld (%s)\n", kind.c_str(),
                    variable ? "var" : "fixed", percent, 100.0 * double(peak) / double(full_peak),
                    (long long)full_peak, planner.describe().c_str());
        // A percentage below the smallest budget the planner can honour is raised (and says
        // so): the promise is then that budget.
        const bool raised = planner.describe().find("raised") != std::string::npos;
        const double budget = raised ? double(planner.checked_budget_bytes())
                                     : double(full_peak) * percent / 100.0;
        EXPECT_LE(double(peak), budget) << kind << (variable ? " variable" : " fixed")
                                        << " lengths, percent=" << percent;
        // What makes it hold without luck (NOTE [ Percent of full BPTT ]): the reference is
        // full's measured peak or less, and with fixed lengths within 1 % of it.
        const int64_t reference = full_bptt_reference(planner.cost_model(), workload);
        EXPECT_LE(reference, full_peak) << kind << (variable ? " variable" : " fixed");
        if (!variable) EXPECT_GE(double(reference), 0.99 * double(full_peak)) << kind;
      }
    }
  }
}

// A cost model that under-predicts (here: tapes and backward transients at half their
// measured bytes) makes a first plan that runs over; the check sees it, measures the
// margin and plans again, so the step still lands within the budget.
TEST(BudgetCap, AWrongCostModelCostsSpeedNeverTheBudget) {
  torch::manual_seed(5);
  const auto problem = fixed_workload("gru", 6, 24, 120, 4, false, 2);
  const Workload workload = problem.workload();
  auto wrong = measured_cost_model(validated(workload));
  const int64_t T = wrong.time_steps();
  const auto budget =
      int64_t(0.3 * double(simulate(uniform_schedule(T, T), wrong).peak_bytes));
  for (auto& b : wrong.step.tape_bytes) b /= 2;
  for (auto& b : wrong.step.backward_transient_bytes) b /= 2;
  PlannerOptions options;
  options.budget_bytes = budget;
  options.cost_model = wrong;
  PlannerMethod planner(options);
  const auto step = measure::measure_iteration(planner, workload, torch::kCPU);
  std::printf("[budget cap] wrong model: budget %lld, measured %lld, margin %.1f%%\n",
              (long long)budget, (long long)step.memory.iteration_peak_bytes,
              100.0 * planner.margin());
  EXPECT_LE(step.memory.iteration_peak_bytes, budget);
  EXPECT_GT(planner.margin(), 0.0) << "the first plan fitted: the test no longer tests the check";
  options.cost_model = CostModel::uniform(T + 1, 1, 1, 1, 10, 5);
  PlannerMethod mismatched(options);
  expect_error_mentions([&] { mismatched.prepare(workload); },
                        {"planner cost_model", "T = 120", "T = 121"});
}

// None fits: the error names the smallest budget the planner can honour, and that budget,
// asked for, is honoured.
TEST(BudgetCap, NoneFitsNamesTheSmallestBudgetItCanHonour) {
  testing::SmallProblem problem("gru", 40, 3, torch::kFloat32);
  problem.batch.lengths = torch::tensor({40, 9, 27}, torch::kLong);
  const auto workload = problem.workload();
  const auto model = measured_cost_model(validated(workload));
  const int64_t asked = minimum_budget(model) / 2;
  PlannerOptions options;
  options.budget_bytes = asked;
  PlannerMethod refuses(options);
  std::string message;
  try {
    refuses.prepare(workload);
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
  }
  ASSERT_FALSE(message.empty()) << "a budget of half the minimum was accepted";
  for (const std::string& fragment : std::vector<std::string>{"planner budget", std::to_string(asked) + " bytes",
                                     "smallest budget", "raise budget to at least "}) {
    EXPECT_NE(message.find(fragment), std::string::npos) << fragment << " in:\n" << message;
  }
  const auto at = message.find("raise budget to at least ");
  ASSERT_NE(at, std::string::npos);
  const int64_t smallest = std::stoll(message.substr(at + 25));
  EXPECT_GT(smallest, asked);
  options.budget_bytes = smallest;
  PlannerMethod honours(options);
  const auto step = measure::measure_iteration(honours, workload, torch::kCPU);
  EXPECT_LE(step.memory.iteration_peak_bytes, smallest);
}

}  // namespace
}  // namespace vlrnn::schedule

namespace vlrnn::schedule {
namespace {

// A percentage below the smallest budget the planner can honour is raised to it (verify's
// matrix asks for 1 %), not silently: once prepared, describe() names the raised budget,
// and the step lands within it.
TEST(BudgetCap, ARaisedPercentageSaysSo) {
  testing::SmallProblem problem("lstm", 30, 2, torch::kFloat64, 2);
  PlannerOptions options;
  options.budget_percent = 1.0;
  PlannerMethod planner(options);
  EXPECT_EQ(planner.describe(), "planner(1% of full)");
  const auto step = measure::measure_iteration(planner, problem.workload(), torch::kCPU);
  EXPECT_NE(planner.describe().find("raised to " +
                                    std::to_string(planner.checked_budget_bytes()) + " bytes"),
            std::string::npos) << planner.describe();
  EXPECT_LE(step.memory.iteration_peak_bytes, planner.checked_budget_bytes());
}

}  // namespace
}  // namespace vlrnn::schedule

namespace vlrnn::schedule {
namespace {

// Inputs and h0 computed by the caller's graph: the planner's check (a gradient step of its
// own in prepare()) neither back-propagates into that graph nor frees it, so the real step
// then gives full BPTT's gradients upstream.
TEST(BudgetCap, TheCheckLeavesTheCallersGraphAlone) {
  testing::SmallProblem problem("gru", 40, 3, torch::kFloat64);
  auto upstream = torch::randn({40, 3, 3}, torch::kFloat64).requires_grad_(true);
  auto upstream_h = torch::randn({1, 3, 4}, torch::kFloat64).requires_grad_(true);
  std::vector<torch::Tensor> grads;
  for (const std::string spec : {"full", "planner:percent=30"}) {
    upstream.mutable_grad() = torch::Tensor();
    upstream_h.mutable_grad() = torch::Tensor();
    problem.batch.inputs = upstream * 2;                 // [T, B, F], not a leaf
    const State h0{upstream_h.tanh()};                   // [1, B, H], not a leaf
    make_method_from_spec(spec)->compute(problem.workload(h0));
    ASSERT_TRUE(upstream.grad().defined() && upstream_h.grad().defined()) << spec;
    grads.push_back(upstream.grad().clone());
    grads.push_back(upstream_h.grad().clone());
  }
  EXPECT_LT(testing::rel_diff(grads[2], grads[0]), 1e-10);
  EXPECT_LT(testing::rel_diff(grads[3], grads[1]), 1e-10);
}

}  // namespace
}  // namespace vlrnn::schedule
