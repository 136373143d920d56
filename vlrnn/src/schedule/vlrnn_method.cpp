#include "vlrnn/schedule/vlrnn_method.h"

#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>

namespace vlrnn {
namespace {

VlrnnOptions checked(VlrnnOptions options) {
  TORCH_CHECK(options.block_length >= 0,
              "vlrnn block_length (K): expected a positive number of steps, got ",
              options.block_length);
  TORCH_CHECK(options.num_blocks >= 0, "vlrnn num_blocks (N): expected a positive count, got ",
              options.num_blocks);
  TORCH_CHECK(!(options.block_length > 0 && options.num_blocks > 0),
              "vlrnn: give block_length (K) or num_blocks (N), not both (got K = ",
              options.block_length, ", N = ", options.num_blocks, ")");
  return options;
}

std::string description(const VlrnnOptions& options) {
  if (options.block_length > 0) return fmt::format("vlrnn(K={})", options.block_length);
  if (options.num_blocks > 0) return fmt::format("vlrnn(N={})", options.num_blocks);
  return "vlrnn(K=auto)";
}

int64_t block_length(const VlrnnOptions& options, const Workload& workload) {
  const int64_t T = workload.batch.time_steps();
  if (options.block_length > 0) return std::min(options.block_length, T);
  if (options.num_blocks > 0) return (T + options.num_blocks - 1) / options.num_blocks;
  return default_block_length(workload);
}

}  // namespace

VlrnnMethod::VlrnnMethod(VlrnnOptions options)
    : ScheduleMethod("vlrnn", description(checked(options)),
                     [options](const Workload& w) {
                       return schedule::uniform_schedule(w.batch.time_steps(),
                                                         block_length(options, w));
                     }),
      options_(options) {}

int64_t VlrnnMethod::block_length_for(const Workload& workload) const {
  return block_length(options_, workload);
}

}  // namespace vlrnn
