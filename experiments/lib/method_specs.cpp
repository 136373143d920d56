#include "lib/method_specs.h"

#include "vlrnn/registry/methods.h"

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
                  "\" (expected names separated by commas, e.g. full,vlrnn:block=64)");
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
  const int64_t blocks = (time_steps + block - 1) / block;
  std::string out = spec;
  for (const auto& [from, to] : {std::pair<std::string, int64_t>{"{K}", block}, {"{N}", blocks}}) {
    for (auto at = out.find(from); at != std::string::npos; at = out.find(from)) {
      out.replace(at, from.size(), std::to_string(to));
    }
  }
  return out;
}

void check_method_specs(const std::vector<std::string>& specs) {
  for (const auto& spec : specs) make_method_from_spec(substitute_block(spec, 8, 64));
}

}  // namespace vlrnn::experiments
