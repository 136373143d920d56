// What `vlrnn budget` chooses under a budget (experiments/lib/budget_choice.h): uniform
// blocks and revolve at their fastest predicted fit under the planning margin, sqrt(T) as
// the reference, the planner prepared on the workload. Shapes: T steps, B sequences,
// F input features, H hidden.
#include "lib/budget_choice.h"

#include "test_util.h"

#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/planner.h"
#include "vlrnn/schedule/schedulers.h"

#include <limits>

namespace vlrnn::experiments {
namespace {

using testing::expect_error_mentions;

constexpr int64_t kChoiceSteps = 120;

// A synthetic length: no problem (the planner is not asked for), a uniform cost model.
BudgetLength synthetic_length() {
  BudgetLength at;
  at.T = kChoiceSteps;
  at.model = schedule::CostModel::uniform(kChoiceSteps, 1.0, 1.5, 2.5, 1000, 150, 5000);
  at.full_predicted =
      schedule::simulate(schedule::uniform_schedule(kChoiceSteps, kChoiceSteps), at.model);
  at.full_peak = at.full_predicted.peak_bytes;
  at.minimum = schedule::minimum_budget(at.model);
  return at;
}

TEST(BudgetChoice, PointsAreFractionsOfFullOrBytes) {
  const auto by_fraction = budget_points({}, {0.1, 0.5}, 2000);
  ASSERT_EQ(by_fraction.size(), 2u);
  EXPECT_EQ(by_fraction[0].bytes, 200);
  EXPECT_DOUBLE_EQ(by_fraction[1].fraction, 0.5);
  EXPECT_EQ(by_fraction[1].bytes, 1000);
  // Bytes replace the fractions, each with the fraction of full it is.
  const auto by_bytes = budget_points({500, 4000}, {0.1, 0.5}, 2000);
  ASSERT_EQ(by_bytes.size(), 2u);
  EXPECT_EQ(by_bytes[0].bytes, 500);
  EXPECT_DOUBLE_EQ(by_bytes[0].fraction, 0.25);
  EXPECT_DOUBLE_EQ(by_bytes[1].fraction, 2.0);
}

TEST(BudgetChoice, RevolveCurvePricesEverySlotCountWorthTrying) {
  const auto at = synthetic_length();
  const auto curve = revolve_curve(at.model);
  const auto slots = schedule::revolve_slot_counts(kChoiceSteps);
  ASSERT_EQ(curve.size(), slots.size());
  for (size_t i = 0; i < curve.size(); ++i) {
    EXPECT_EQ(curve[i].slots, slots[i]);
    EXPECT_EQ(curve[i].recompute_steps, schedule::binomial_forward_steps(kChoiceSteps, slots[i]));
    const auto p = schedule::simulate(schedule::revolve_schedule(kChoiceSteps, slots[i]), at.model);
    EXPECT_EQ(curve[i].predicted.peak_bytes, p.peak_bytes);
    EXPECT_DOUBLE_EQ(curve[i].predicted.seconds, p.seconds);
  }
}

// Uniform blocks: the fastest K whose predicted peak fits the margin's share of the budget,
// checked against every K by brute force.
TEST(BudgetChoice, UniformIsTheFastestBlockLengthInsideTheMargin) {
  const auto at = synthetic_length();
  for (const double fraction : {0.15, 0.3, 0.6}) {
    const auto budget = int64_t(fraction * double(at.full_peak));
    const auto choices = choose({"uniform"}, false, at, budget);
    ASSERT_EQ(choices.specs.size(), 1u) << fraction;
    const auto& spec = choices.specs[0];
    ASSERT_EQ(spec.rfind("vlrnn:block_length=", 0), 0u) << spec;
    EXPECT_EQ(choices.label_of_spec.at(spec), "uniform");
    const int64_t K = std::stoll(spec.substr(std::string("vlrnn:block_length=").size()));
    const auto chosen = schedule::simulate(schedule::uniform_schedule(kChoiceSteps, K), at.model);
    const auto& predicted = choices.chosen.at("uniform").at("predicted");
    EXPECT_EQ(predicted.at("peak_bytes").get<int64_t>(), chosen.peak_bytes);
    EXPECT_LE(double(chosen.peak_bytes), kPlanningMargin * double(budget));
    for (int64_t k = 1; k <= kChoiceSteps; ++k) {
      const auto p = schedule::simulate(schedule::uniform_schedule(kChoiceSteps, k), at.model);
      if (double(p.peak_bytes) <= kPlanningMargin * double(budget)) {
        EXPECT_GE(p.seconds, chosen.seconds) << "K=" << k << " is faster and fits";
      }
    }
  }
}

// A budget equal to a schedule's predicted peak does not take it: the margin is kept. (Here
// a longer block recomputes less, so without the margin K = 10 itself would win.)
TEST(BudgetChoice, KeepsThePlanningMargin) {
  const auto at = synthetic_length();
  const auto exactly = schedule::simulate(schedule::uniform_schedule(kChoiceSteps, 10), at.model);
  const auto choices = choose({"uniform"}, false, at, exactly.peak_bytes);
  ASSERT_TRUE(choices.chosen.at("uniform").contains("predicted")) << choices.chosen.dump();
  EXPECT_LE(choices.chosen.at("uniform").at("predicted").at("peak_bytes").get<double>(),
            kPlanningMargin * double(exactly.peak_bytes));
  EXPECT_NE(choices.specs.at(0), "vlrnn:block_length=10");
}

TEST(BudgetChoice, RevolveIsTheFastestSlotCountInsideTheMargin) {
  const auto at = synthetic_length();
  const auto curve = revolve_curve(at.model);
  for (const double fraction : {0.1, 0.2, 0.5}) {
    const auto budget = int64_t(fraction * double(at.full_peak));
    const auto choices = choose({"revolve"}, false, at, budget);
    ASSERT_EQ(choices.specs.size(), 1u) << fraction;
    const auto slots = choices.chosen.at("revolve").at("slots").get<int64_t>();
    EXPECT_EQ(choices.specs[0], "revolve:slots=" + std::to_string(slots));
    EXPECT_EQ(choices.label_of_spec.count(choices.specs[0]), 0u);  // its own name, "revolve"
    const auto chosen = std::find_if(curve.begin(), curve.end(),
                                     [&](const RevolvePoint& p) { return p.slots == slots; });
    ASSERT_NE(chosen, curve.end());
    EXPECT_LE(double(chosen->predicted.peak_bytes), kPlanningMargin * double(budget));
    for (const auto& p : curve) {
      if (double(p.predicted.peak_bytes) <= kPlanningMargin * double(budget)) {
        EXPECT_GE(p.predicted.seconds, chosen->predicted.seconds) << "s=" << p.slots;
      }
    }
  }
}

TEST(BudgetChoice, AMethodThatCannotFitSaysWhyAndRunsNothing) {
  const auto at = synthetic_length();
  const auto choices = choose({"uniform", "revolve"}, true, at, at.minimum / 2);
  EXPECT_EQ(choices.specs, std::vector<std::string>{"full"});
  const auto why = choices.chosen.at("uniform").at("error").get<std::string>();
  EXPECT_NE(why.find("no block length K fits"), std::string::npos) << why;
  EXPECT_EQ(choices.chosen.at("revolve").at("error"), "no slot count fits");
}

// Full first when it runs, then the methods in budget_methods()'s order, whatever order
// they were asked in; sqrt(T) regardless of the budget.
TEST(BudgetChoice, SpecsRunFullFirstThenTheMethodsInOrder) {
  const auto at = synthetic_length();
  const auto budget = at.full_peak;  // everything fits
  const auto choices = choose({"sqrt", "revolve", "uniform"}, true, at, budget);
  ASSERT_EQ(choices.specs.size(), 4u);
  EXPECT_EQ(choices.specs[0], "full");
  EXPECT_EQ(choices.specs[1].rfind("vlrnn:block_length=", 0), 0u);
  EXPECT_EQ(choices.specs[2].rfind("revolve:slots=", 0), 0u);
  EXPECT_EQ(choices.specs[3], "vlrnn:num_blocks=" + std::to_string(sqrt_steps(kChoiceSteps)));
  EXPECT_EQ(choices.label_of_spec.at(choices.specs[3]), "sqrt");
  const auto sqrt_peak =
      schedule::simulate(schedule::sqrt_checkpoint_schedule(kChoiceSteps), at.model).peak_bytes;
  EXPECT_EQ(choices.chosen.at("sqrt").at("predicted").at("peak_bytes").get<int64_t>(), sqrt_peak);
  EXPECT_EQ(choose({"sqrt"}, false, at, 1).specs.size(), 1u);  // no budget applies to it
}

TEST(BudgetChoice, UnknownMethodsAreNamed) {
  const auto at = synthetic_length();
  expect_error_mentions([&] { choose({"uniform", "nosuch"}, false, at, at.full_peak); },
                        {"budget methods", "planner,uniform,revolve,sqrt", "\"nosuch\""});
  expect_error_mentions([] { check_budget_methods({""}, "--methods"); }, {"--methods", "\"\""});
  expect_error_mentions([&] { choose({"planner"}, false, at, at.full_peak); },
                        {"planner needs the problem"});
}

// On a real (small) problem: the cost model and full's peak, then the planner prepared on the
// workload: a budget it can honour gives its spec and the peak it measured within it; one
// below its minimum gives its refusal and no spec.
// A small problem: F = 3, H = 6, C = 2, B = 2.
ProblemSpec small_spec(const std::string& model, int64_t T) {
  ProblemSpec spec;
  spec.model = model;
  spec.input_size = 3;
  spec.hidden_size = 6;
  spec.head_outputs = 2;
  spec.time_steps = T;
  spec.batch = 2;
  return spec;
}

TEST(BudgetChoice, MeasuresALengthAndPreparesThePlanner) {
  const auto spec = small_spec("gru", 24);
  const auto problem = make_problem(spec);
  const auto at = measure_length(problem, /*run_full=*/true);
  EXPECT_EQ(at.T, 24);
  EXPECT_EQ(at.model.time_steps(), 24);
  EXPECT_EQ(at.spec.describe(), spec.describe());
  EXPECT_GT(at.full_peak, 0);
  EXPECT_LE(at.minimum, at.full_predicted.peak_bytes);
  EXPECT_EQ(measure_length(problem, /*run_full=*/false).full_peak, at.full_predicted.peak_bytes);

  const int64_t generous = 4 * at.full_peak;
  const auto fits = choose({"planner"}, false, at, generous);
  ASSERT_EQ(fits.specs, std::vector<std::string>{"planner:budget=" + std::to_string(generous)});
  const auto& planner = fits.chosen.at("planner");
  EXPECT_LE(planner.at("checked_peak_bytes").get<int64_t>(), generous);
  EXPECT_GE(planner.at("margin").get<double>(), 0.0);
  EXPECT_TRUE(planner.contains("schedule") && planner.contains("chosen_by"));

  const auto refused = choose({"planner"}, false, at, 1);
  EXPECT_TRUE(refused.specs.empty());
  EXPECT_NE(refused.chosen.at("planner").at("error").get<std::string>().find("smallest"),
            std::string::npos);
}

// A bidirectional model: no cost model, full's measured peak; the planner runs bivlrnn under
// the budget and records the K it chose and its measured peak, sqrt is bivlrnn at
// K = ceil(sqrt(T)), uniform and revolve say why they do not apply; --no-full is refused.
TEST(BudgetChoice, ABidirectionalModelGetsThePlannersBivlrnn) {
  const auto problem = make_problem(small_spec("bilstm", 30));
  const auto at = measure_length(problem, /*run_full=*/true);
  EXPECT_TRUE(at.bidirectional);
  EXPECT_GT(at.full_peak, 0);
  expect_error_mentions([&] { measure_length(problem, /*run_full=*/false); },
                        {"budget", "bidirectional", "bilstm", "--no-full"});
  const auto budget = at.full_peak / 2;
  const auto choices = choose({"planner", "uniform", "revolve", "sqrt"}, true, at, budget);
  EXPECT_EQ(choices.specs, (std::vector<std::string>{"full", "planner:budget=" + std::to_string(budget),
                                                     "bivlrnn:block_length=6"}));
  const auto& planner = choices.chosen.at("planner");
  EXPECT_LE(planner.at("checked_peak_bytes").get<int64_t>(), budget);
  EXPECT_NE(planner.at("schedule").get<std::string>().find("bivlrnn(budget="), std::string::npos)
      << planner.dump();
  for (const char* method : {"uniform", "revolve"}) {
    EXPECT_NE(choices.chosen.at(method).at("error").get<std::string>().find("bidirectional"),
              std::string::npos) << method;
  }
  EXPECT_EQ(choices.label_of_spec.at("bivlrnn:block_length=6"), "sqrt");
}

}  // namespace
}  // namespace vlrnn::experiments
