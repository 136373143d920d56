#pragma once
// Every gradient method, found by name. Adding a built-in method is one class and one entry
// in registry/src/methods.cpp; a library user adds their own with add_method(). The
// verifier, drivers, benchmarks and tests pick every entry up from here.
// This layer sits above the engine and the baselines: it is the one place that names
// methods from both (docs/architecture.md).

#include "vlrnn/methods/gradient_method.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

// Integer options by name, as written on a command line: "vlrnn:block=64".
// A factory take()s what it understands; finish() rejects anything left over.
class MethodParams {
 public:
  MethodParams() = default;
  MethodParams(std::initializer_list<std::pair<const std::string, int64_t>> values)
      : values_(values) {}

  void set(const std::string& key, int64_t value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  // The value of `key` (removing it from the unread set), or `fallback` when absent.
  int64_t take(const std::string& key, int64_t fallback);
  // Throws naming each key no factory read, and the keys `method` knows.
  void finish(const std::string& method, const std::vector<std::string>& known) const;
  const std::map<std::string, int64_t>& values() const { return values_; }

 private:
  std::map<std::string, int64_t> values_;
  std::vector<std::string> read_;
};

using MethodFactory = std::function<std::unique_ptr<GradientMethod>(MethodParams)>;

struct MethodEntry {
  std::string name;
  std::string summary;  // one line for --help
  MethodFactory make;
};

// Every method, the built-ins first (registered on first use of the registry, explicitly:
// a static initialiser in a static library is dropped when nothing references its file).
// Not thread-safe against a concurrent add_method(): add methods before using them.
const std::vector<MethodEntry>& method_registry();
// Registers a method under `name` (e.g. one of your own); throws if the name is taken.
void add_method(const std::string& name, const std::string& summary, MethodFactory make);
std::vector<std::string> method_names();
// Throws listing the known names when `name` is unknown.
std::unique_ptr<GradientMethod> make_method(const std::string& name, MethodParams params = {});
// Parses "name" or "name:key=value,key=value" (e.g. "vlrnn:block=64").
std::unique_ptr<GradientMethod> make_method_from_spec(const std::string& spec);

}  // namespace vlrnn
