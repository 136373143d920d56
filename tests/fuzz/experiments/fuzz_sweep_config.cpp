// Fuzz target: a sweep config file's text (`vlrnn sweep CONFIG`): JSON with comments, then
// parse_sweep_config, the config hash and, for grids of a sane size, expand_points (the
// points a sweep would run, templates substituted).
#include "fuzz_util.h"

#include "lib/json_fields.h"
#include "lib/sweep_config.h"

#include <algorithm>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrnn::fuzz::skip_error_backtraces();
  return 0;
}

namespace {

// An upper bound on the points of `config` (before duplicates are dropped): a list of 100
// values in each of six keys is a valid grid of 10^12 points, too many to expand per input.
double point_bound(const vlrnn::experiments::SweepConfig& config) {
  double total = 0;
  for (const auto& e : config.experiments) {
    total += double(e.models.size()) * double(e.layers.size()) * double(e.hidden_sizes.size()) *
             double(e.time_steps.size()) * double(e.batches.size()) *
             double(std::max<size_t>(1, e.blocks.size())) * double(e.methods.size());
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlrnn::experiments;
  try {
    const auto json = json_fields::parse_json_text(vlrnn::fuzz::as_text(data, size), "fuzz.json");
    const auto config = parse_sweep_config(json, "fuzz");
    config_hash(config);
    if (point_bound(config) <= 4096) expand_points(config);
  } catch (const c10::Error&) {
  }
  return 0;
}
