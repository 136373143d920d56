#include "test_util.h"

#include "lib/merge.h"
#include "lib/results_store.h"
#include "lib/shard.h"
#include "lib/sweep_runner.h"

#include <filesystem>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::expect_error_mentions;

// A tiny sweep (6 groups of 2 points, about a millisecond each) run once unsharded and
// once as 3 shards; each test copies the shard folders it needs and merges the copies.
class MergeTest : public ::testing::Test {
 protected:
  static SweepConfig config() {
    return parse_sweep_config(json::parse(R"({"models": "lstm", "input": 2, "hidden": 4, "classes": 2,
      "repeats": 1, "warmup": 0, "block_length": [4], "methods": ["full", "vlrnn"], "T": [8, 16, 32],
      "batch": [1, 2]})"), "tiny_merge");
  }
  static fs::path root() { return fs::temp_directory_path() / ("vlrnn_merge_" + std::to_string(::getpid())); }
  static void sweep(const fs::path& dir, ShardSpec shard) {
    SweepOptions options;
    options.out_dir = dir.string();
    options.shard = shard;
    options.peak_gemm_size = 32;
    options.peak_gemm_repeats = 1;
    run_sweep(config(), options);
  }
  static void SetUpTestSuite() {
    fs::remove_all(root());
    sweep(root() / "whole", {0, 1});
    for (int64_t i = 0; i < 3; ++i) sweep(root() / ("shard" + std::to_string(i)), {i, 3});
  }
  static void TearDownTestSuite() { fs::remove_all(root()); }

  void SetUp() override {
    dir_ = root() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }
  // A fresh copy of shard i, free to edit.
  std::string shard(int i) {
    const auto to = dir_ / ("shard" + std::to_string(i));
    fs::copy(root() / ("shard" + std::to_string(i)), to, fs::copy_options::recursive);
    return to.string();
  }
  MergeReport merge(const std::vector<std::string>& dirs) {
    return merge_shards({(dir_ / "merged").string(), dirs, "vlrnn_tests merge"});
  }
  static std::vector<std::string> keys(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& r : ResultsStore(dir.string()).read_records()) out.push_back(r["key"].get<std::string>());
    return out;
  }
  void edit_meta(const std::string& dir, const std::string& key, const json& value) {
    ResultsStore store(dir);
    auto meta = store.read_meta();
    meta[key] = value;
    store.write_meta(meta);
  }

  fs::path dir_;
};

TEST_F(MergeTest, ThreeShardsMergeIntoThePointsOfTheUnshardedRunInItsOrder) {
  const auto report = merge({shard(2), shard(0), shard(1)});
  EXPECT_TRUE(report.complete());
  EXPECT_EQ(report.shards, 3);
  EXPECT_EQ(report.folders, 3);
  EXPECT_EQ(report.total, 12);
  EXPECT_EQ(report.merged, 12);
  EXPECT_EQ(report.duplicates, 0);
  EXPECT_EQ(keys(dir_ / "merged"), keys(root() / "whole"));
  // Every shard measured something: the partition spread the 6 groups over all three.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(keys(root() / ("shard" + std::to_string(i))).empty());

  ResultsStore merged((dir_ / "merged").string());
  EXPECT_TRUE(fs::exists(merged.csv_path()));
  const auto meta = merged.read_meta();
  EXPECT_EQ(meta["status"], "complete");
  EXPECT_EQ(meta["merged_from"].size(), 3u);
  EXPECT_FALSE(meta.contains("shard"));
  EXPECT_EQ(meta["config_hash"], config_hash(config()));
  EXPECT_EQ(meta["config_name"], "tiny_merge");  // what scripts/plot.py's caption reads
}

TEST_F(MergeTest, AShardThatDiedIsReportedWithThePointsItOwesAndARerunCompletesTheSet) {
  const auto absent = (dir_ / "never_started").string();
  const std::vector<std::string> dirs = {shard(0), absent, shard(2)};
  auto report = merge(dirs);
  EXPECT_FALSE(report.complete());
  EXPECT_EQ(report.absent_dirs, std::vector<std::string>{absent});
  ASSERT_EQ(report.missing.size(), 1u);
  EXPECT_EQ(report.missing.begin()->first, 1);  // shard 1 owes them
  EXPECT_EQ(report.missing[1], keys(root() / "shard1"));
  EXPECT_EQ(ResultsStore((dir_ / "merged").string()).read_meta()["status"], "incomplete");

  fs::copy(root() / "shard1", absent, fs::copy_options::recursive);  // the resubmitted task
  report = merge(dirs);
  EXPECT_TRUE(report.complete());
  EXPECT_EQ(keys(dir_ / "merged"), keys(root() / "whole"));
}

TEST_F(MergeTest, APointRecordedTwiceIsKeptOnceAndAnOkRecordBeatsAFailedOne) {
  const auto first = shard(0);
  const auto again = (dir_ / "shard0_rerun").string();
  fs::copy(first, again, fs::copy_options::recursive);
  // The first run's copy of one point failed; the re-run measured it.
  auto records = ResultsStore(first).read_records();
  const std::string key = records.front()["key"];
  records.front()["status"] = "error";
  ResultsStore(first).replace_records(records);

  const auto report = merge({first, again, shard(1), shard(2)});
  EXPECT_TRUE(report.complete());
  EXPECT_EQ(report.duplicates, int64_t(records.size()));
  EXPECT_EQ(keys(dir_ / "merged"), keys(root() / "whole"));
  for (const auto& r : ResultsStore((dir_ / "merged").string()).read_records()) {
    if (r["key"] == key) EXPECT_EQ(r["status"], "ok");
  }
}

TEST_F(MergeTest, RefusesShardsOfDifferentConfigsCommitsDevicesOrCounts) {
  const auto a = shard(0), b = shard(1);
  edit_meta(b, "config_hash", "0123456789abcdef");
  expect_error_mentions([&] { merge({a, b}); }, {"config_hash", config_hash(config()), "0123456789abcdef", b});
  edit_meta(b, "config_hash", config_hash(config()));
  edit_meta(b, "git_sha", "feedface");
  expect_error_mentions([&] { merge({a, b}); }, {"git_sha", "feedface", b, "commits"});
  edit_meta(b, "git_sha", ResultsStore(a).read_meta()["git_sha"]);
  edit_meta(b, "devices", json{{"cpu", "another CPU"}});
  expect_error_mentions([&] { merge({a, b}); }, {"device cpu", "another CPU", b});
  edit_meta(b, "devices", ResultsStore(a).read_meta()["devices"]);
  edit_meta(b, "shard", json{{"index", 1}, {"count", 4}});
  expect_error_mentions([&] { merge({a, b}); }, {"split 3 ways", "1/4", b});
}

TEST_F(MergeTest, TheMergedTreeStateIsDirtyIfAnyShardWasElseUnknownIfAnyWas) {
  const auto merged_dirty = [&](const json& a, const json& b, const json& c) {
    const std::vector<std::string> dirs = {shard(0), shard(1), shard(2)};
    edit_meta(dirs[0], "git_dirty", a);
    edit_meta(dirs[1], "git_dirty", b);
    edit_meta(dirs[2], "git_dirty", c);
    merge(dirs);
    const auto meta = ResultsStore((dir_ / "merged").string()).read_meta();
    for (const auto& dir : dirs) fs::remove_all(dir);
    fs::remove_all(dir_ / "merged");
    EXPECT_EQ(meta["command"], "vlrnn_tests merge");
    return meta["git_dirty"];
  };
  EXPECT_EQ(merged_dirty(false, false, false), json(false));
  EXPECT_EQ(merged_dirty(false, "unknown", false), json("unknown"));
  EXPECT_EQ(merged_dirty("unknown", true, false), json(true));
}

TEST_F(MergeTest, BadArgumentsSayWhatWasExpected) {
  const auto a = shard(0);
  expect_error_mentions([&] { merge_shards({a, {a}, ""}); }, {"merge OUT", "other than the shard folders", a});
  expect_error_mentions([&] { merge({}); }, {"merge DIR", "at least one"});
  expect_error_mentions([&] { merge({(dir_ / "nothing").string()}); }, {"merge DIR", "meta.json", "got none"});
  const auto not_a_sweep = (dir_ / "not_a_sweep").string();
  ResultsStore(not_a_sweep).write_meta({{"status", "complete"}});
  expect_error_mentions([&] { merge({not_a_sweep}); }, {"merge DIR", not_a_sweep, "config_hash"});
}

}  // namespace
}  // namespace vlrnn::experiments
