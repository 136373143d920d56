#pragma once
// Runs a sweep: every point of a config's grid, each appended to the result folder as it
// finishes, with a progress line (points done / total, current point, ETA) on stderr.

#include "lib/shard.h"
#include "lib/sweep_config.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace vlrnn::experiments {

struct SweepOptions {
  std::string out_dir;       // results/<config name> by default (the command decides)
  bool resume = false;       // skip points already in results.jsonl
  ShardSpec shard;           // run only this shard's points (lib/shard.h); 0/1: all
  std::string command;       // the command line, recorded in meta.json
  // Polled between points; true stops the sweep cleanly (SIGINT / SIGTERM).
  std::function<bool()> stop_requested;
  int64_t peak_gemm_size = 1024;
  int64_t peak_gemm_repeats = 10;
};

struct SweepSummary {
  int64_t total = 0;      // points in the grid (in the shard, when sharded)
  int64_t skipped = 0;    // already recorded (--resume)
  int64_t measured = 0;   // recorded by this run
  int64_t failed = 0;     // of those, status "oom" or "error"
  bool interrupted = false;
};

SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options);

}  // namespace vlrnn::experiments
