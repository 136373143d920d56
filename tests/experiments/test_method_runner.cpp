#include "lib/method_runner.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace vlrnn::experiments {
namespace {

Problem small_problem(const std::string& kind = "rnn", torch::Dtype dtype = torch::kFloat32) {
  ProblemSpec spec;
  spec.model = kind;
  spec.input_size = 3;
  spec.hidden_size = 4;
  spec.head_outputs = 2;
  spec.time_steps = 16;
  spec.batch = 2;
  spec.dtype = dtype;
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
  const auto runs = run_methods(problem, {"full", "vlrnn:block_length=4"}, rounds_only(5));
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
  auto runs = run_methods(problem, {"full", "vlrnn:block_length=4"}, options);
  EXPECT_EQ(runs[0].time.samples, 6);
  EXPECT_EQ(runs[1].time.samples, 6);
  // A tolerance any ratio meets: it stops as soon as an interval has enough rounds to
  // count (MedianInterval::kMinSamples), not at the cap.
  options.stable_within = 0.99;
  options.max_repeats = 50;
  runs = run_methods(problem, {"full", "vlrnn:block_length=4"}, options);
  EXPECT_LT(runs[1].time.samples, 50);
  EXPECT_GE(runs[1].time.samples, measure::MedianInterval::kMinSamples);
}

// METHOD@KIND (NOTE [ One function, several models ] in compare): LibTorch's LSTM and the
// hand-written lstm_block with one set of weights and one batch compute one function, so
// their runs, interleaved, have the same gradients to float64 rounding.
TEST(MethodRunner, RunsMethodsOnOtherKindsOfTheSameFunction) {
  const auto base = small_problem("lstm", torch::kFloat64);
  const auto block = make_problem_of_kind(base, "lstm_block");
  EXPECT_TRUE(torch::equal(block.batch.inputs, base.batch.inputs));
  RunOptions options;
  options.warmup = 0;
  options.repeats = 2;
  const auto runs = run_methods({&base, &block, &block}, {"full", "full", "vlrnn:block_length=5"}, options);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].model, "");
  EXPECT_EQ(runs[1].model, "lstm_block");
  EXPECT_EQ(to_json(runs[1])["run_model"], "lstm_block");
  EXPECT_FALSE(to_json(runs[0]).contains("run_model"));
  for (size_t i = 1; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].status, "ok") << runs[i].error;
    EXPECT_EQ(runs[i].time.samples, 2);
    ASSERT_TRUE(runs[i].error_vs_full.has_value());
    EXPECT_LE(runs[i].error_vs_full->max_rel, 1e-10) << runs[i].spec;
  }
  // A kind whose parameters do not match by name and shape is refused, naming both.
  testing::expect_error_mentions([&] { make_problem_of_kind(base, "gru"); },
                                 {"models lstm and gru"});
}

}  // namespace
}  // namespace vlrnn::experiments
