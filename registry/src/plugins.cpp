#include "vlrnn/registry/plugins.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

namespace vlrnn {

void load_plugin(const std::string& path, const std::string& argument) {
  static std::set<std::string> loaded;  // canonical paths
  TORCH_CHECK(std::filesystem::is_regular_file(path), argument, ": plugin \"", path,
              "\" does not exist (expected a shared library exporting extern \"C\" void ",
              kPluginEntryPoint, "())");
  const auto canonical = std::filesystem::canonical(path).string();
  if (loaded.count(canonical)) return;
  // RTLD_NOW: a symbol the plugin needs and the tool lacks fails here, named by dlerror,
  // instead of at some later call. A name without '/' would be searched in the library
  // path: pass the canonical path.
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle, argument, ": cannot load plugin \"", path,
              "\" (expected a shared library built against this vlrnn and LibTorch): ", dlerror());
  using Entry = void (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kPluginEntryPoint));
  if (!entry) {
    dlclose(handle);
    TORCH_CHECK(false, argument, ": plugin \"", path, "\" has no symbol ", kPluginEntryPoint,
                " (expected extern \"C\" void ", kPluginEntryPoint,
                "() calling vlrnn::add_model / vlrnn::add_method)");
  }
  // Marked before the call: a plugin that throws halfway is not run twice. The library
  // stays loaded for the life of the process (its factories live in the registries).
  loaded.insert(canonical);
  entry();
}

void load_plugins_from_env() {
  const char* value = std::getenv("VLRNN_PLUGINS");
  if (!value) return;
  std::stringstream paths(value);
  for (std::string path; std::getline(paths, path, ':');) {
    if (!path.empty()) load_plugin(path, "VLRNN_PLUGINS");
  }
}

}  // namespace vlrnn
