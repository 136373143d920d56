#pragma once
// Which shard of a sweep split N ways (lib/shard.h) a run is: `--shard I/N`, read without
// LibTorch (c10's errors only), so its fuzz target (tests/fuzz/experiments/) builds in seconds.

#include <cstdint>
#include <string>

namespace vlrnn::experiments {

struct ShardSpec {
  int64_t index = 0;  // 0 <= index < count; Slurm's SLURM_ARRAY_TASK_ID with --array=0-(N-1)
  int64_t count = 1;  // 1: the whole sweep
  bool sharded() const { return count > 1; }
  std::string str() const;  // "I/N"
};

// "I/N" (e.g. "0/3"); throws naming --shard, what was expected and what came.
ShardSpec parse_shard(const std::string& text);

}  // namespace vlrnn::experiments
