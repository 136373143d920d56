#pragma once
// How a sweep's points are run: in groups (points that share a problem run interleaved,
// so their time ratios are paired) and at a predicted cost (what the ETA and the shard
// partition weigh them by).

#include "lib/sweep_config.h"

#include <vector>

namespace vlrnn::experiments {

// Relative cost of a point: FLOPs of the iterations it will run (warm-up, repeats and
// the gradient-error comparison). Only ratios between points mean anything.
double point_cost(const SweepPoint& point, const ExperimentSpec& experiment);

// Splits `points` (in sweep order) into runs of adjacent points of one grid experiment on
// one problem; a max_batch point is a group of its own. The groups partition `points` and
// keep their order.
std::vector<std::vector<const SweepPoint*>> group_points(const std::vector<const SweepPoint*>& points,
                                                         const SweepConfig& config);

}  // namespace vlrnn::experiments
