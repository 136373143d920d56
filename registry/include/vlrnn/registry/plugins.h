#pragma once
// Plugins: shared libraries that add models or methods to the registries by name, loaded
// while the program runs (the `vlrnn` tool's --plugin, vlrnn.load_plugin from Python).
//
// NOTE [ Plugins ]
// A plugin is a shared library exporting
//     extern "C" void vlrnn_register_plugin();
// which calls vlrnn::add_model / vlrnn::add_method (examples/indrnn_plugin.cpp). It is
// built against the same LibTorch and VLRNN headers as the tool, and does not link VLRNN's
// static libraries: the tool exports its symbols (ENABLE_EXPORTS), so the plugin's calls
// reach the tool's own registries. `--plugin PATH` (verify, compare, sweep, budget) or
// VLRNN_PLUGINS=PATH[:PATH...] loads it before the command runs; from Python,
// vlrnn.load_plugin (NOTE [ Plugins from Python ] in python/src/module.cpp).

#include <string>

namespace vlrnn {

// The entry point every plugin exports.
inline constexpr const char* kPluginEntryPoint = "vlrnn_register_plugin";

// dlopens `path` and calls its vlrnn_register_plugin(); a path already loaded is skipped.
// Throws naming `argument` and the path when the file is missing, is no shared library
// (dlerror's words) or lacks the entry point.
void load_plugin(const std::string& path, const std::string& argument = "--plugin");
// Every path of VLRNN_PLUGINS (colon-separated; unset or empty: none).
void load_plugins_from_env();

}  // namespace vlrnn
