#include "test_util.h"

#include "lib/shard.h"
#include "lib/sweep_plan.h"

#include <set>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using testing::expect_error_mentions;

TEST(Shard, ParsesIndexSlashCount) {
  const auto shard = parse_shard("2/3");
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 3);
  EXPECT_TRUE(shard.sharded());
  EXPECT_EQ(shard.str(), "2/3");
  EXPECT_FALSE(parse_shard("0/1").sharded());
}

TEST(Shard, BadTextNamesTheArgumentWhatWasExpectedAndWhatCame) {
  for (const std::string text : {"3/3", "x", "1", "-1/3", "1/0", "", "1/3x", "/3", "1/"}) {
    expect_error_mentions([&] { parse_shard(text); }, {"--shard", "0 <= I < N", "got \"" + text + "\""});
  }
}

// 8 grid groups of 2 points whose costs go 1 : 2 : 4 : ... : 128 (T x B), plus 2 max_batch
// points when asked.
SweepConfig shard_config(bool max_batch = true) {
  auto text = json::parse(R"({"hidden": 4, "input": 2, "classes": 2, "block_length": [4],
    "experiments": [
      {"name": "a", "methods": ["full", "vlrnn"], "T": [16, 64, 256, 1024], "batch": [1, 2]},
      {"name": "b", "kind": "max_batch", "methods": ["full", "vlrnn:block_length=4"], "T": 16, "budget_mib": 1}]})");
  if (!max_batch) text["experiments"].erase(1);
  return parse_sweep_config(text, "shards");
}

TEST(Shard, ThePartitionIsDisjointCompleteDeterministicAndKeepsGroupsTogether) {
  const auto c = shard_config();
  const auto points = expand_points(c);
  for (int64_t n : {1, 2, 3, 5, 40}) {
    const auto shards = assign_shards(c, points, n);
    ASSERT_EQ(shards.size(), points.size());
    EXPECT_EQ(shards, assign_shards(c, points, n));
    std::multiset<std::string> seen;
    for (int64_t i = 0; i < n; ++i) {
      for (const auto& p : points_of_shard(c, points, {i, n})) seen.insert(p.key);
    }
    EXPECT_EQ(seen.size(), points.size()) << n << " shards";
    for (const auto& p : points) EXPECT_EQ(seen.count(p.key), 1u) << p.key;
    // Points sharing a problem (run interleaved) share a shard.
    for (size_t i = 1; i < points.size(); ++i) {
      if (points[i].experiment == 0 && points[i].problem == points[i - 1].problem) {
        EXPECT_EQ(shards[i], shards[i - 1]);
      }
    }
  }
}

TEST(Shard, BalancedByPredictedCostNotByCount) {
  const auto c = shard_config(/*max_batch=*/false);
  const auto points = expand_points(c);
  const auto shards = assign_shards(c, points, 2);
  std::vector<double> load(2, 0.0);
  std::vector<int64_t> count(2, 0);
  for (size_t i = 0; i < points.size(); ++i) {
    load[size_t(shards[i])] += point_cost(points[i], c.experiments[points[i].experiment]);
    ++count[size_t(shards[i])];
  }
  // The T = 1024, B = 2 group (128) costs about as much as the 7 others together (127): it
  // is a shard of its own, and the two loads are within 1 %.
  EXPECT_EQ(count[0], 2);
  EXPECT_EQ(count[1], 14);
  EXPECT_LT(std::max(load[0], load[1]) / std::min(load[0], load[1]), 1.01);
}

}  // namespace
}  // namespace vlrnn::experiments
