#pragma once
// Models the `vlrnn` tool did not ship with, made known by name without editing the
// library: plugins (shared libraries that register models or methods) and TorchScript
// model and head files (vlrnn/core/script_model.h, script_head.h).
//
// NOTE [ Plugins ]
// A plugin is a shared library exporting
//     extern "C" void vlrnn_register_plugin();
// which calls vlrnn::add_model / vlrnn::add_method (examples/indrnn_plugin.cpp). It is
// built against the same LibTorch and VLRNN headers as the tool, and does not link VLRNN's
// static libraries: the tool exports its symbols (ENABLE_EXPORTS), so the plugin's calls
// reach the tool's own registries. `--plugin PATH` (verify, compare, sweep, budget) or
// VLRNN_PLUGINS=PATH[:PATH...] loads it before the command runs.

#include <string>

namespace vlrnn::experiments {

// The entry point every plugin exports.
inline constexpr const char* kPluginEntryPoint = "vlrnn_register_plugin";

// dlopens `path` and calls its vlrnn_register_plugin(); a path already loaded is skipped.
// Throws naming `argument` and the path when the file is missing, is no shared library
// (dlerror's words) or lacks the entry point.
void load_plugin(const std::string& path, const std::string& argument = "--plugin");
// Every path of VLRNN_PLUGINS (colon-separated; unset or empty: none).
void load_plugins_from_env();

// Registers the TorchScript model saved at `path` as a model kind named by the path itself
// (once; a second call returns the same kind) and returns the kind. The file is loaded and
// checked now, and loaded afresh by every make_model() of the kind. The file fixes the
// model's sizes: ModelConfig's input_size, hidden_size, num_layers and dropout are ignored
// (make_problem takes F and H from the model). Throws naming `argument` (unless empty) and
// the file on a bad file.
std::string add_model_file(const std::string& path, const std::string& argument = "--model-file");

// The same for a TorchScript head (NOTE [ The TorchScript head signature ]): registers it
// as a head kind named by the path (add_head) and returns the kind. The file fixes the
// head's sizes (its input_size Z and the targets it reads): HeadConfig's input_size and
// outputs are ignored; its sparse_targets is honoured.
std::string add_head_file(const std::string& path, const std::string& argument = "--head-file");

}  // namespace vlrnn::experiments
