// Fuzz target: method specs as users type them, `--methods full,vlrnn:block_length=64,tbptt:k1=8,k2=16`
// or a config's "planner:percent=20": the list splitter (lib/method_specs.h), the registry's
// spec reader (parse_method_spec) and, for templates, {K}/{N} substituted as a sweep does.
#include "fuzz_util.h"

#include "lib/method_specs.h"

#include "vlrnn/registry/method_params.h"

#include <stdexcept>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrnn::fuzz::skip_error_backtraces();
  return 0;
}

namespace {

void read_spec(const std::string& spec) {
  try {
    const auto parsed = vlrnn::parse_method_spec(spec);
    if (parsed.name != vlrnn::experiments::method_name_of(spec)) {
      throw std::logic_error("parse_method_spec and method_name_of disagree on the name");
    }
  } catch (const c10::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlrnn::experiments;
  std::vector<std::string> specs;
  try {
    specs = split_method_list(vlrnn::fuzz::as_text(data, size));
  } catch (const c10::Error&) {
    return 0;
  }
  for (const auto& spec : specs) {
    if (spec.empty()) throw std::logic_error("split_method_list returned an empty spec");
    read_spec(spec);
    if (!uses_block(spec)) continue;
    // A sweep's K values and T values are any integers >= 1 (lib/sweep_config.h).
    for (const auto& [block, steps] : {std::pair<int64_t, int64_t>{8, 64}, {3, INT64_MAX},
                                       {INT64_MAX, 1}, {INT64_MAX, INT64_MAX}}) {
      try {
        read_spec(substitute_block(spec, block, steps));
      } catch (const c10::Error&) {
      }
    }
  }
  return 0;
}
