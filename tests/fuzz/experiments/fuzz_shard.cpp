// Fuzz target: `vlrnn sweep --shard I/N` (parse_shard).
#include "fuzz_util.h"

#include "lib/shard_spec.h"

#include <stdexcept>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrnn::fuzz::skip_error_backtraces();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto shard = vlrnn::experiments::parse_shard(vlrnn::fuzz::as_text(data, size));
    if (shard.index < 0 || shard.index >= shard.count) {
      throw std::logic_error("parse_shard accepted a shard outside 0 <= I < N");
    }
    // What it accepted reads back as itself.
    if (vlrnn::experiments::parse_shard(shard.str()).str() != shard.str()) {
      throw std::logic_error("parse_shard(shard.str()) differs from the shard");
    }
  } catch (const c10::Error&) {
  }
  return 0;
}
