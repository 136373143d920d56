#pragma once
// Every model kind, found by name: the built-in LibTorch models (vlrnn/core/models.h), the
// GRU variants with a hand-written block backward (vlrnn/cells/gru_block.h), and any a
// user adds with add_model(). The factory names core/ and cells/ alike, so it lives here,
// above both, and neither includes the other's factory (docs/architecture.md).

#include "vlrnn/core/models.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

using ModelFactory = std::function<std::shared_ptr<RecurrentModule>(const ModelConfig&)>;

struct ModelEntry {
  std::string kind;
  std::string summary;  // one line for listings
  ModelFactory make;
};

// Every model kind, the built-ins first (registered explicitly on first use): "rnn", "gru",
// "lstm", "gru_lstm", "gru_v1" .. "gru_v4", "lstm_block", "lstm_cells", and the linear
// recurrences "mingru", "minlstm", "lru", "ssm" (vlrnn/cells/linear_recurrence.h). Not
// thread-safe against a concurrent add_model(): add kinds before using them.
const std::vector<ModelEntry>& model_registry();
std::vector<std::string> model_kinds();
// Registers a model kind (e.g. your own cell); throws if the kind is taken.
void add_model(const std::string& kind, const std::string& summary, ModelFactory make);
// Throws unless make_model() builds `kind`: a registered kind, or "bi:" followed by a
// registered left-to-right kind (vlrnn/core/bidirectional.h); the error lists the kinds.
void check_model_kind(const std::string& kind);
// Builds `config.kind`; throws listing the known kinds when it is unknown.
std::shared_ptr<RecurrentModule> make_model(const ModelConfig& config);

}  // namespace vlrnn
