#include "lib/method_runner.h"

#include <gtest/gtest.h>

#include <cmath>

namespace vlrnn::experiments {
namespace {

Problem small_problem() {
  ProblemSpec spec;
  spec.model = "rnn";
  spec.input_size = 3;
  spec.hidden_size = 4;
  spec.head_outputs = 2;
  spec.time_steps = 16;
  spec.batch = 2;
  return make_problem(spec);
}

// No warm-up, no gradient comparison: only the timed rounds matter here.
RunOptions rounds_only(int64_t repeats) {
  RunOptions options;
  options.warmup = 0;
  options.repeats = repeats;
  options.gradient_error = false;
  return options;
}

TEST(MethodRunner, PairedRatiosCarryAnIntervalAndANoisyFlag) {
  const auto problem = small_problem();
  const auto runs = run_methods(problem, {"full", "vlrnn:block=4"}, rounds_only(5));
  const auto* full = find_full(runs);
  ASSERT_NE(full, nullptr);
  const auto record = ratio_json(runs[1], full);
  const double median = record["paired_time_ratio_to_full"];
  const auto ci = record["paired_time_ratio_ci"];
  EXPECT_DOUBLE_EQ(median, paired_time_ratio(runs[1], *full));
  EXPECT_LE(ci[0].get<double>(), median);
  EXPECT_GE(ci[1].get<double>(), median);
  EXPECT_EQ(record["time_ratio_noisy"].get<bool>(), paired_ratio_interval(runs[1], *full).noisy());
  EXPECT_TRUE(ratio_json(runs[1], nullptr).empty()) << "no ratio without full BPTT";
}

TEST(MethodRunner, UntilStableAddsRoundsUpToTheCap) {
  const auto problem = small_problem();
  auto options = rounds_only(1);
  options.max_repeats = 6;
  // A tolerance no two timings meet: rounds are added until the cap.
  options.stable_within = 1e-12;
  auto runs = run_methods(problem, {"full", "vlrnn:block=4"}, options);
  EXPECT_EQ(runs[0].time.samples, 6);
  EXPECT_EQ(runs[1].time.samples, 6);
  // A tolerance any ratio meets: it stops as soon as an interval has enough rounds to
  // count (MedianInterval::kMinSamples), not at the cap.
  options.stable_within = 0.99;
  options.max_repeats = 50;
  runs = run_methods(problem, {"full", "vlrnn:block=4"}, options);
  EXPECT_LT(runs[1].time.samples, 50);
  EXPECT_GE(runs[1].time.samples, measure::MedianInterval::kMinSamples);
}

}  // namespace
}  // namespace vlrnn::experiments
