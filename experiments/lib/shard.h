#pragma once
// Shards: a sweep split into N disjoint parts (one per Slurm array task), each run on its
// own into its own result folder and merged afterwards (lib/merge.h).
//
// NOTE [ Balanced by cost, not by count ]: points differ in cost by orders of magnitude
// (T = 256 against T = 10^5), so N equal counts would leave one shard running for days.
// The partition works on groups (lib/sweep_plan.h: points sharing a problem stay on one
// shard, so their paired time ratios survive) and places them largest first, each on the
// shard with the least predicted cost so far (ties: the lower index) — a pure function of
// the config, so every shard and `merge` compute the same one without talking.

#include "lib/shard_spec.h"
#include "lib/sweep_config.h"

#include <string>
#include <vector>

namespace vlrnn::experiments {

// The shard of every point of `points` (expand_points(config), in its order).
std::vector<int64_t> assign_shards(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                   int64_t count);

// The points of one shard, in sweep order.
std::vector<SweepPoint> points_of_shard(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                        const ShardSpec& shard);

}  // namespace vlrnn::experiments
