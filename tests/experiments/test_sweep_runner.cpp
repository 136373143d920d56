#include "test_util.h"

#include "lib/results_store.h"
#include "lib/shard.h"
#include "lib/sweep_runner.h"

#include "vlrnn/measure/flops.h"

#include <filesystem>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A tiny sweep end to end: records, OOM points, resume, a clean stop. Shapes are small so
// that it runs in about a second.
class SweepRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_folder("vlrnn_sweep_");
    options_.out_dir = dir_.string();
    options_.command = "vlrnn_tests";
    options_.peak_gemm_size = 64;
    options_.peak_gemm_repeats = 2;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // full and vlrnn at T = 64 and 2048 (F = 4, H = 8, B = 2); under a 1 MiB cap full BPTT
  // runs out of memory at T = 2048 (about 2 MiB of activations) and VLRNN does not.
  static SweepConfig config() {
    return parse_sweep_config(json::parse(R"({
      "memory_limit_mib": 1, "models": "lstm", "input": 4, "hidden": 8, "classes": 3,
      "batch": 2, "repeats": 1, "warmup": 0,
      "experiments": [
        {"name": "a", "methods": ["full", "vlrnn"], "T": [64, 2048], "block_length": [16]},
        {"name": "b", "kind": "max_batch", "methods": ["vlrnn:block_length=8"], "T": 32,
         "budget_mib": 0.25, "batch_max": 64}
      ]})"), "tiny");
  }

  fs::path dir_;
  SweepOptions options_;
};

TEST_F(SweepRunnerTest, RecordsEveryPointAndOutOfMemoryAndResumes) {
  const auto summary = run_sweep(config(), options_);
  EXPECT_EQ(summary.total, 5);
  EXPECT_EQ(summary.measured, 5);
  EXPECT_EQ(summary.failed, 1);
  EXPECT_FALSE(summary.interrupted);

  ResultsStore store(dir_.string());
  const auto records = store.read_records();
  ASSERT_EQ(records.size(), 5u);
  std::map<std::string, std::string> status;
  for (const auto& r : records) status[r["method"].get<std::string>() + "@" + std::to_string(r["T"].get<int64_t>())] = r["status"];
  EXPECT_EQ(status["full@64"], "ok");
  EXPECT_EQ(status["full@2048"], "oom");
  EXPECT_EQ(status["vlrnn:block_length=16@2048"], "ok");
  const auto& max_batch = records.back();
  EXPECT_EQ(max_batch["kind"], "max_batch");
  EXPECT_GT(max_batch["max_batch"].get<int64_t>(), 1);
  EXPECT_LE(max_batch["total_bytes"].get<int64_t>(), 262144);
  EXPECT_TRUE(fs::exists(store.csv_path()));

  const auto meta = store.read_meta();
  EXPECT_EQ(meta["status"], "complete");
  EXPECT_EQ(meta["config_name"], "tiny");
  EXPECT_TRUE(meta.contains("git_sha"));
  EXPECT_TRUE(meta["peak_gemm"].contains("cpu/float32"));
  EXPECT_EQ(meta["config"]["memory_limit_mib"], 1);

  options_.resume = true;
  const auto again = run_sweep(config(), options_);
  EXPECT_EQ(again.skipped, 5);
  EXPECT_EQ(again.measured, 0);
  EXPECT_EQ(store.read_records().size(), 5u);
}

TEST_F(SweepRunnerTest, AStoppedSweepKeepsWhatItWroteAndResumeFinishesIt) {
  int polls = 0;
  options_.stop_requested = [&polls] { return ++polls > 1; };  // stop after the first group
  const auto stopped = run_sweep(config(), options_);
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.measured, 2);  // full and vlrnn at T = 64, run interleaved
  ResultsStore store(dir_.string());
  EXPECT_EQ(store.read_meta()["status"], "interrupted");

  options_.stop_requested = nullptr;
  options_.resume = true;
  const auto finished = run_sweep(config(), options_);
  EXPECT_EQ(finished.skipped, 2);
  EXPECT_EQ(finished.measured, 3);
  EXPECT_EQ(store.read_records().size(), 5u);
  EXPECT_EQ(store.read_meta()["previous_runs"].size(), 1u);
}

TEST_F(SweepRunnerTest, AFreshSweepMovesEarlierResultsAside) {
  ResultsStore store(dir_.string());
  store.append({{"key", "from an earlier sweep"}});
  options_.stop_requested = [] { return true; };  // measure nothing
  run_sweep(config(), options_);
  EXPECT_TRUE(fs::exists(dir_ / "previous" / "results.jsonl"));
  EXPECT_FALSE(store.has_records());
}

TEST_F(SweepRunnerTest, AShardRunsItsOwnPointsRecordsItselfAndResumesOnlyItself) {
  const auto all = expand_points(config());
  options_.shard = {1, 2};
  const auto mine = points_of_shard(config(), all, options_.shard);
  ASSERT_FALSE(mine.empty());
  ASSERT_LT(mine.size(), all.size());
  const auto summary = run_sweep(config(), options_);
  EXPECT_EQ(summary.total, int64_t(mine.size()));
  ResultsStore store(dir_.string());
  std::set<std::string> recorded = store.recorded_keys(), expected;
  for (const auto& p : mine) expected.insert(p.key);
  EXPECT_EQ(recorded, expected);
  const auto meta = store.read_meta();
  EXPECT_EQ(meta["shard"], (json{{"index", 1}, {"count", 2}, {"points", mine.size()}}));
  EXPECT_EQ(meta["config_hash"], config_hash(config()));
  EXPECT_TRUE(meta.contains("host"));

  // Resuming this folder as another shard, or with another config, would mix two sweeps.
  options_.resume = true;
  options_.shard = {0, 2};
  testing::expect_error_mentions([&] { run_sweep(config(), options_); },
                                 {"--shard", "expected 1/2", "got 0/2"});
  auto other = config();
  other.raw["seed"] = 2;
  options_.shard = {1, 2};
  testing::expect_error_mentions([&] { run_sweep(other, options_); },
                                 {"--resume", config_hash(other), meta["config_hash"].get<std::string>()});
  EXPECT_EQ(run_sweep(config(), options_).skipped, int64_t(mine.size()));
}

// The bidirectional kinds (bilstm, bi:<kind>) with the methods that take them, the planner's
// budgeted bivlrnn included, and the linear recurrences with VLRNN: a tiny sweep runs every
// point, and the records count FLOPs for them (a FLOP model, not the weight-shape fallback).
TEST_F(SweepRunnerTest, BidirectionalAndLinearKindsRun) {
  const auto config = parse_sweep_config(json::parse(R"({
    "input": 3, "hidden": 6, "classes": 3, "batch": 2, "repeats": 1, "warmup": 0, "T": 24,
    "experiments": [
      {"name": "bi", "models": ["bilstm", "bi:gru_v3", "bi:mingru"],
       "methods": ["full", "bivlrnn", "bivlrnn:percent=40", "planner:percent=40", "checkpoint"]},
      {"name": "linear", "models": ["mingru", "minlstm", "lru", "ssm"],
       "methods": ["full", "vlrnn"], "block_length": [6]}
    ]})"), "kinds");
  const auto summary = run_sweep(config, options_);
  EXPECT_EQ(summary.total, 3 * 5 + 4 * 2);
  EXPECT_EQ(summary.failed, 0);
  for (const auto& r : ResultsStore(dir_.string()).read_records()) {
    const auto name = r["model"].get<std::string>() + " " + r["method"].get<std::string>();
    ASSERT_EQ(r["status"], "ok") << name << ": " << r.dump();
    // Forward + backward (3 forwards) over T·B = 48 steps, from the table (flops.h).
    const auto per_step = measure::flops_per_step({r["model"].get<std::string>(), 3, 6, 1},
                                                  r["head"].get<std::string>(), 3);
    EXPECT_DOUBLE_EQ(r["flops"]["useful"].get<double>(), 48.0 * 3.0 * per_step.forward()) << name;
  }
}

}  // namespace
}  // namespace vlrnn::experiments
