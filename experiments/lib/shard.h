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

#include "lib/sweep_config.h"

#include <string>
#include <vector>

namespace vlrnn::experiments {

struct ShardSpec {
  int64_t index = 0;  // 0 <= index < count; Slurm's SLURM_ARRAY_TASK_ID with --array=0-(N-1)
  int64_t count = 1;  // 1: the whole sweep
  bool sharded() const { return count > 1; }
  std::string str() const;  // "I/N"
};

// "I/N" (e.g. "0/3"); throws naming --shard, what was expected and what came.
ShardSpec parse_shard(const std::string& text);

// The shard of every point of `points` (expand_points(config), in its order).
std::vector<int64_t> assign_shards(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                   int64_t count);

// The points of one shard, in sweep order.
std::vector<SweepPoint> points_of_shard(const SweepConfig& config, const std::vector<SweepPoint>& points,
                                        const ShardSpec& shard);

}  // namespace vlrnn::experiments
