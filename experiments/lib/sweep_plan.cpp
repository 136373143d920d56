#include "lib/sweep_plan.h"

#include "vlrnn/measure/flops.h"

namespace vlrnn::experiments {

double point_cost(const SweepPoint& point, const ExperimentSpec& experiment) {
  const auto& p = point.problem;
  // An unknown model kind is costed as an LSTM: this is only a prediction.
  const std::string kind = measure::has_flop_model(p.model) ? p.model : "lstm";
  // A head of the user's (a head file) likewise as a ce head of its C.
  const std::string head = p.head == "mse" ? "mse" : "ce";
  const double per_step = measure::flops_per_step({kind, p.input_size, p.hidden_size, p.num_layers},
                                                  head, p.head_outputs).forward() * 3.0;
  const double runs = double(experiment.warmup + experiment.repeats) + (experiment.gradient_error ? 2.0 : 0.0);
  if (experiment.kind == "max_batch") {
    // Unknown until searched: assume a few hundred sequences and ~8 probes.
    return per_step * double(p.time_steps) * 256.0 * (runs + 8.0);
  }
  return per_step * double(p.time_steps) * double(p.batch) * runs;
}

std::vector<std::vector<const SweepPoint*>> group_points(const std::vector<const SweepPoint*>& points,
                                                         const SweepConfig& config) {
  std::vector<std::vector<const SweepPoint*>> groups;
  for (const auto* point : points) {
    const bool grid = config.experiments[point->experiment].kind == "grid";
    const bool joins = grid && !groups.empty() && groups.back().front()->experiment == point->experiment &&
                       groups.back().front()->problem == point->problem;
    if (joins) groups.back().push_back(point);
    else groups.push_back({point});
  }
  return groups;
}

}  // namespace vlrnn::experiments
