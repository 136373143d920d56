#include "lib/json_fields.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace vlrnn::experiments::json_fields {

json read_json_file(const std::string& path) {
  std::ifstream file(path);
  TORCH_CHECK(file, "config: cannot read \"", path, "\"");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_json_text(text.str(), path);
}

json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double (1e999) is out_of_range.
    TORCH_CHECK(false, "config \"", source, "\": not valid JSON: ", e.what());
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  TORCH_CHECK(false, "config ", path, ": ", message);
}

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a number with a fraction";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  return "an object";
}

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

int64_t read_int(const json& v, const std::string& path, int64_t min) {
  if (!(v.is_number_integer() || v.is_number_unsigned())) {
    fail(path, fmt::format("expected an integer >= {}, got {} ({})", min, type_of(v), shown(v)));
  }
  // Above INT64_MAX, get<int64_t>() would wrap to a negative number, and the message
  // would show that instead of what was written.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
    fail(path, fmt::format("expected an integer >= {}, got {} (above the largest, {})", min,
                           v.get<uint64_t>(), INT64_MAX));
  }
  const auto value = v.get<int64_t>();
  if (value < min) fail(path, fmt::format("expected an integer >= {}, got {}", min, value));
  return value;
}

double read_positive_number(const json& v, const std::string& path) {
  if (!v.is_number()) fail(path, fmt::format("expected a positive number, got {} ({})", type_of(v), shown(v)));
  const double value = v.get<double>();
  if (!(value > 0)) fail(path, fmt::format("expected a positive number, got {}", value));
  return value;
}

int64_t read_mib(const json& v, const std::string& path) {
  const double mib = read_positive_number(v, path);
  const double bytes = std::round(mib * 1048576.0);
  constexpr double kMaxBytes = 4611686018427387904.0;  // 2^62: 4 EiB
  if (!(bytes >= 1 && bytes <= kMaxBytes)) {
    fail(path, fmt::format("expected a size in MiB from 1 byte (1 / 1048576) to 4 EiB "
                           "(4398046511104), got {}", mib));
  }
  return int64_t(bytes);
}

double read_number(const json& v, const std::string& path, double min, double max) {
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max)) {
    fail(path, fmt::format("expected a number in [{}, {}], got {} ({})", min, max, type_of(v),
                           shown(v)));
  }
  return v.get<double>();
}

std::vector<int64_t> read_int_list(const json& v, const std::string& path, int64_t min,
                                   bool allow_empty) {
  if (!v.is_array()) return {read_int(v, path, min)};
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(read_int(v[i], fmt::format("{}[{}]", path, i), min));
  if (out.empty() && !allow_empty) fail(path, "expected at least one value, got an empty list");
  return out;
}

std::string read_string(const json& v, const std::string& path,
                        const std::vector<std::string>& allowed) {
  if (!v.is_string()) fail(path, fmt::format("expected a string, got {} ({})", type_of(v), shown(v)));
  const auto s = v.get<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    fail(path, fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), s));
  }
  return s;
}

std::vector<std::string> read_string_list(const json& v, const std::string& path,
                                          const std::vector<std::string>& allowed) {
  if (!v.is_array()) return {read_string(v, path, allowed)};
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    out.push_back(read_string(v[i], fmt::format("{}[{}]", path, i), allowed));
  }
  return out;
}

bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path, fmt::format("expected true or false, got {} ({})", type_of(v), shown(v)));
  return v.get<bool>();
}

void check_keys(const json& object, const std::string& path, const std::vector<std::string>& known,
                const std::vector<RenamedKey>& renamed) {
  for (const auto& item : object.items()) {
    const auto key_path = path.empty() ? item.key() : path + "." + item.key();
    for (const auto& old : renamed) {
      if (old.key == item.key()) fail(key_path, old.message);
    }
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      fail(key_path, fmt::format("unknown key; known keys: {}", fmt::join(known, ", ")));
    }
  }
}

}  // namespace vlrnn::experiments::json_fields
