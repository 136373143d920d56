#pragma once
// VLRNN: exact BPTT in blocks of K steps, for the price of one extra forward pass without
// gradients. Memory: K steps of activations + one stored state per block.
//
// VLRNN is the uniform schedule (vlrnn/schedule/schedulers.h: uniform_schedule) run by the
// one schedule executor (vlrnn/schedule/schedule_method.h); this class only chooses K. So it
// lives in schedule/, above the GradientMethod interface in methods/ (docs/architecture.md).

#include "vlrnn/schedule/schedule_method.h"

namespace vlrnn {

struct VlrnnOptions {
  // K: steps per block. 0 = derive from num_blocks.
  int64_t block_length = 0;
  // N: number of blocks (K = ceil(T / N)); used when block_length is 0. Default when both
  // are 0 ("K=auto"): ceil(sqrt(T)), shortened on the CPU so that a block's states fit the
  // L2 cache (default_block_length, NOTE [ A block that fits the cache ] in methods/block.h).
  int64_t num_blocks = 0;

  VlrnnOptions& with_block_length(int64_t k) { block_length = k; return *this; }
  VlrnnOptions& with_num_blocks(int64_t n) { num_blocks = n; return *this; }
};

class VlrnnMethod : public schedule::ScheduleMethod {
 public:
  explicit VlrnnMethod(VlrnnOptions options = {});
  // The block length used on `workload`.
  int64_t block_length_for(const Workload& workload) const;

 private:
  VlrnnOptions options_;
};

}  // namespace vlrnn
