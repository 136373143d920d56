#include "vlrnn/registry/method_params.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace vlrnn {

int64_t MethodParams::take(const std::string& key, int64_t fallback) {
  read_.push_back(key);
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

void MethodParams::finish(const std::string& method, const std::vector<std::string>& known) const {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : values_) {
    if (std::find(read_.begin(), read_.end(), key) == read_.end()) unknown.push_back(key);
  }
  TORCH_CHECK(unknown.empty(), "method ", method, ": unknown option(s) ",
              fmt::format("{}", fmt::join(unknown, ", ")), "; known options: ",
              known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
}

MethodSpec parse_method_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  MethodSpec out;
  out.name = spec.substr(0, colon);
  if (colon != std::string::npos) {
    std::string rest = spec.substr(colon + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      const auto comma = rest.find(',', start);
      const std::string item = rest.substr(start, comma - start);
      const auto eq = item.find('=');
      TORCH_CHECK(eq != std::string::npos && eq > 0, "method spec \"", spec,
                  "\": expected options as key=value, got \"", item, "\"");
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      size_t used = 0;
      int64_t number = 0;
      try {
        number = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TORCH_CHECK(used == value.size() && !value.empty(), "method spec \"", spec, "\": option ",
                  key, " expects an integer, got \"", value, "\"");
      out.params.set(key, number);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace vlrnn
