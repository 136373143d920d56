#pragma once
// Every gradient method, found by name. Adding a built-in method is one class and one entry
// in registry/src/methods.cpp; a library user adds their own with add_method(). The
// verifier, drivers, benchmarks and tests pick every entry up from here.
// This layer sits above the engine and the baselines: it is the one place that names
// methods from both (docs/architecture.md).

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/registry/method_params.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

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
// Parses "name" or "name:key=value,key=value" (e.g. "vlrnn:block_length=64").
std::unique_ptr<GradientMethod> make_method_from_spec(const std::string& spec);

}  // namespace vlrnn
