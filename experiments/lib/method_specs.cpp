#include "lib/method_specs.h"

#include <c10/util/Exception.h>

namespace vlrnn::experiments {

std::vector<std::string> split_method_list(const std::string& list) {
  std::vector<std::string> specs;
  size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    const bool continues = !specs.empty() && item.find('=') != std::string::npos &&
                           item.find(':') == std::string::npos && has_options(specs.back());
    if (continues) {
      specs.back() += "," + item;
    } else {
      TORCH_CHECK(!item.empty(), "methods: empty entry in \"", list,
                  "\" (expected names separated by commas, e.g. full,vlrnn:block_length=64)");
      specs.push_back(item);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return specs;
}

std::string method_name_of(const std::string& spec) { return spec.substr(0, spec.find(':')); }

bool has_options(const std::string& spec) { return spec.find(':') != std::string::npos; }

bool uses_block(const std::string& spec) {
  return spec.find("{K}") != std::string::npos || spec.find("{N}") != std::string::npos;
}

std::string substitute_block(const std::string& spec, int64_t block, int64_t time_steps) {
  TORCH_CHECK(block >= 1, "block (K): expected >= 1, got ", block);
  // ceil(T / K), written so that T near INT64_MAX (a sweep config allows it) cannot overflow.
  const int64_t blocks = time_steps / block + (time_steps % block != 0);
  std::string out = spec;
  for (const auto& [from, to] : {std::pair<std::string, int64_t>{"{K}", block}, {"{N}", blocks}}) {
    for (auto at = out.find(from); at != std::string::npos; at = out.find(from)) {
      out.replace(at, from.size(), std::to_string(to));
    }
  }
  return out;
}

}  // namespace vlrnn::experiments
