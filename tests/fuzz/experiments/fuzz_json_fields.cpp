// Fuzz target: a config file's text as both config loaders read it (lib/json_fields.h):
// JSON with comments (parse_json_text), then every value read as each kind of field a
// sweep or training config has: integers with a minimum, numbers in a range, lists,
// strings from a fixed set, booleans, objects with known keys. What a reader accepts must
// be what it promises (in range, unchanged).
#include "fuzz_util.h"

#include "lib/json_fields.h"

#include <stdexcept>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrnn::fuzz::skip_error_backtraces();
  return 0;
}

namespace {

using nlohmann::json;
using namespace vlrnn::experiments::json_fields;

template <typename Read>
void try_read(Read read) {
  try {
    read();
  } catch (const c10::Error&) {
  }
}

void expect(bool ok, const char* what) {
  if (!ok) throw std::logic_error(what);
}

// One reader per value, taken in turn (the n-th value of the walk gets reader n mod 13):
// every reader on every value would throw thousands of errors per input, slowing the run
// a hundredfold for no new paths.
void read_values(const json& v, const std::string& path, size_t& n) {
  type_of(v);
  expect(shown(v).size() <= 60, "shown() longer than 60 characters");
  switch (n++ % 13) {
    case 0:
      try_read([&] {
        const auto x = read_int(v, path, 1);
        expect(x >= 1 && json(x) == v, "read_int changed the value");
      });
      break;
    case 1: try_read([&] { read_int(v, path, 0); }); break;
    case 2:
      try_read([&] { expect(read_positive_number(v, path) > 0, "read_positive_number accepted <= 0"); });
      break;
    case 3:
      try_read([&] {
        const double x = read_number(v, path, -20, 20);
        expect(x >= -20 && x <= 20, "read_number accepted a value outside its range");
      });
      break;
    case 4: try_read([&] { expect(read_mib(v, path) > 0, "read_mib accepted a size <= 0"); }); break;
    case 5:
      try_read([&] {
        const auto list = read_int_list(v, path, 1, false);
        expect(!list.empty(), "read_int_list accepted an empty list");
        for (const auto x : list) expect(x >= 1, "read_int_list accepted a value below its minimum");
      });
      break;
    case 6: try_read([&] { read_int_list(v, path, 0, true); }); break;
    case 7: try_read([&] { read_string(v, path); }); break;
    case 8:
      try_read([&] {
        const auto s = read_string(v, path, {"float32", "float64"});
        expect(s == "float32" || s == "float64", "read_string accepted a value outside its set");
      });
      break;
    case 9: try_read([&] { read_string_list(v, path); }); break;
    case 10: try_read([&] { read_string_list(v, path, {"full", "vlrnn"}); }); break;
    case 11: try_read([&] { read_bool(v, path); }); break;
    default:  // the loaders check the keys of objects only
      if (v.is_object()) {
        try_read([&] { check_keys(v, path, {"name", "T", "batch", "methods", "experiments"}); });
      }
  }
  if (v.is_object()) {
    for (const auto& item : v.items()) read_values(item.value(), path + "." + item.key(), n);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) read_values(v[i], path + "[" + std::to_string(i) + "]", n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json config;
  try {
    config = parse_json_text(vlrnn::fuzz::as_text(data, size), "fuzz.json");
  } catch (const c10::Error&) {
    return 0;
  }
  size_t n = size;  // a different reader first for different inputs
  read_values(config, "$", n);
  return 0;
}
