#pragma once
// Models the `vlrnn` tool did not ship with, made known by name without editing the
// library: TorchScript model and head files (vlrnn/core/script_model.h, script_head.h);
// plugins load through vlrnn/registry/plugins.h.

#include "vlrnn/registry/plugins.h"

#include <string>

namespace vlrnn::experiments {

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
