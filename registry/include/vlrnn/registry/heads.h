#pragma once
// Every per-step head, found by name: the built-ins "ce" (Linear + cross-entropy) and "mse"
// (Linear + squared error) of vlrnn/core/heads.h, and any a user adds with add_head(): a
// C++ head, a plugin's, or a TorchScript file's (vlrnn/core/script_head.h). Beside the
// models' registry (models.h), on the same template (NOTE [ One registry template ] in
// registry.h).

#include "vlrnn/core/heads.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

struct HeadConfig {
  std::string kind = "ce";
  int64_t input_size = 0;  // Z: the model's output size
  // C classes ("ce") or O outputs ("mse"); a head that fixes its own (a head file) ignores it.
  int64_t outputs = 2;
  // Accept the markers of steps without a target (NOTE [ Steps without a target ]).
  bool sparse_targets = false;
};

using HeadFactory = std::function<std::shared_ptr<OutputModule>(const HeadConfig&)>;

struct HeadEntry {
  std::string kind;
  std::string summary;  // one line for listings
  HeadFactory make;
};

// Every head kind, the built-ins first ("ce", "mse"; registered explicitly on first use).
// Not thread-safe against a concurrent add_head(): add kinds before using them.
const std::vector<HeadEntry>& head_registry();
std::vector<std::string> head_kinds();
// Registers a head kind (e.g. your own likelihood); throws if the kind is taken.
void add_head(const std::string& kind, const std::string& summary, HeadFactory make);
// Builds `config.kind`; throws listing the known kinds when it is unknown.
std::shared_ptr<OutputModule> make_head(const HeadConfig& config);
std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs, bool sparse_targets = false);

}  // namespace vlrnn
