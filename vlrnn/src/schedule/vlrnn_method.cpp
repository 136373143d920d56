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
  return "vlrnn(K=sqrt(T))";
}

int64_t block_length(const VlrnnOptions& options, int64_t time_steps) {
  if (options.block_length > 0) return std::min(options.block_length, time_steps);
  if (options.num_blocks > 0) return (time_steps + options.num_blocks - 1) / options.num_blocks;
  return sqrt_steps(time_steps);
}

}  // namespace

VlrnnMethod::VlrnnMethod(VlrnnOptions options)
    : ScheduleMethod("vlrnn", description(checked(options)),
                     [options](const Workload& w) {
                       const int64_t T = w.batch.time_steps();
                       return schedule::uniform_schedule(T, block_length(options, T));
                     }),
      options_(options) {}

int64_t VlrnnMethod::block_length_for(int64_t time_steps) const {
  return block_length(options_, time_steps);
}

}  // namespace vlrnn
