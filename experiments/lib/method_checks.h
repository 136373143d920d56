#pragma once
// Whether method specs (lib/method_specs.h) name methods the registry can build.

#include <string>
#include <vector>

namespace vlrnn::experiments {

// Throws (the registry's message, listing the known names) unless every spec makes a
// method; templates are tried with K = 8, T = 64.
void check_method_specs(const std::vector<std::string>& specs);

}  // namespace vlrnn::experiments
