#pragma once
// What every fuzz target shares (tests/fuzz/README.md): the input as text, and errors made
// cheap to throw.
//
// NOTE [ What a fuzz target accepts ]: a parser may reject any input, but only with
// c10::Error, the library's "bad argument" exception, whose message the commands print as
// `vlrnn: error: ...`. Anything else that escapes (std::out_of_range, nlohmann's
// type_error, ...) ends the run: libFuzzer reports the uncaught exception as a crash, like
// AddressSanitizer's and UndefinedBehaviorSanitizer's reports, a hang (-timeout) or running
// out of memory (-rss_limit_mb).

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace vlrnn::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// LibTorch 1.13 records a symbolised backtrace in every c10::Error (milliseconds each);
// nearly every fuzz input is rejected, so this would be most of the run time.
inline void skip_error_backtraces() {
  c10::SetStackTraceFetcher([] { return std::string(); });
}

}  // namespace vlrnn::fuzz
