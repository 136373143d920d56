#include "lib/shard_spec.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace vlrnn::experiments {
namespace {

// A whole non-negative decimal integer, or -1.
int64_t parse_count(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(text);
}

}  // namespace

std::string ShardSpec::str() const { return fmt::format("{}/{}", index, count); }

ShardSpec parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const int64_t index = slash == std::string::npos ? -1 : parse_count(text.substr(0, slash));
  const int64_t count = slash == std::string::npos ? -1 : parse_count(text.substr(slash + 1));
  TORCH_CHECK(index >= 0 && count >= 1 && index < count,
              "--shard: expected I/N with integers 0 <= I < N (e.g. 0/3, the first of three), got \"",
              text, "\"");
  return {index, count};
}

}  // namespace vlrnn::experiments
