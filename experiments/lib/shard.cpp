#include "lib/shard.h"

#include "lib/sweep_plan.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

namespace vlrnn::experiments {

std::vector<int64_t> assign_shards(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                   int64_t count) {
  TORCH_CHECK(count >= 1, "shards: expected a count >= 1, got ", count);
  std::vector<const SweepPoint*> pointers;
  for (const auto& point : points) pointers.push_back(&point);
  const auto groups = group_points(pointers, config);
  std::vector<double> cost(groups.size(), 0.0);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto* point : groups[g]) cost[g] += point_cost(*point, config.experiments[point->experiment]);
  }
  // See NOTE [ Balanced by cost, not by count ]: largest first, stable on sweep order.
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(size_t(count), 0.0);
  std::vector<int64_t> shard_of_group(groups.size(), 0);
  for (size_t g : order) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    shard_of_group[g] = lightest;
    load[size_t(lightest)] += cost[g];
  }
  std::vector<int64_t> shards;
  for (size_t g = 0; g < groups.size(); ++g) shards.insert(shards.end(), groups[g].size(), shard_of_group[g]);
  return shards;
}

std::vector<SweepPoint> points_of_shard(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                        const ShardSpec& shard) {
  const auto shards = assign_shards(config, points, shard.count);
  std::vector<SweepPoint> mine;
  for (size_t i = 0; i < points.size(); ++i) {
    if (shards[i] == shard.index) mine.push_back(points[i]);
  }
  return mine;
}

}  // namespace vlrnn::experiments
