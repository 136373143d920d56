#include "vlrnn/registry/models.h"

#include "vlrnn/cells/block_lstm.h"
#include "vlrnn/cells/gru_variants.h"
#include "vlrnn/cells/lru.h"
#include "vlrnn/cells/min_rnn.h"
#include "vlrnn/cells/selective_ssm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {
namespace {

std::shared_ptr<RecurrentModule> make_torch_rnn(CellKind cell, const ModelConfig& config) {
  return std::make_shared<TorchRnn>(cell, config.input_size, config.hidden_size,
                                    config.num_layers, config.dropout);
}

// The built-in kinds, in the order model_kinds() lists them.
std::vector<ModelEntry> builtin_models() {
  std::vector<ModelEntry> entries = {
      {"rnn", "Elman RNN (tanh), LibTorch's RNN; L layers",
       [](const ModelConfig& c) { return make_torch_rnn(CellKind::kRnnTanh, c); }},
      {"gru", "LibTorch's GRU; L layers",
       [](const ModelConfig& c) { return make_torch_rnn(CellKind::kGru, c); }},
      {"lstm", "LibTorch's LSTM; L layers",
       [](const ModelConfig& c) { return make_torch_rnn(CellKind::kLstm, c); }},
      {"gru_lstm", "a GRU feeding a 3-layer LSTM (a tuple state of three tensors)",
       [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
         return std::make_shared<GruLstmStack>(c.input_size, c.hidden_size, c.hidden_size,
                                               c.dropout);
       }},
  };
  for (auto variant : all_gru_variants()) {
    const std::string kind = "gru_" + to_string(variant);
    entries.push_back(
        {kind, "GRU variant " + to_string(variant) + " with a hand-written block backward; L layers",
         [variant](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
           return std::make_shared<BlockGru>(variant, c.input_size, c.hidden_size, c.num_layers,
                                             c.dropout);
         }});
  }
  entries.push_back({"lstm_block", "LSTM with a hand-written block backward; L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<BlockLstm>(c.input_size, c.hidden_size,
                                                          c.num_layers, c.dropout);
                     }});
  // Linear recurrences, run by an in-block scan (vlrnn/cells/linear_recurrence.h).
  entries.push_back({"mingru", "minGRU (Feng et al. 2024), an in-block scan; L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<MinGru>(c.input_size, c.hidden_size, c.num_layers, c.dropout);
                     }});
  entries.push_back({"minlstm", "minLSTM (Feng et al. 2024), an in-block scan; L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<MinLstm>(c.input_size, c.hidden_size, c.num_layers, c.dropout);
                     }});
  entries.push_back({"lru", "LRU (Orvieto et al. 2023), complex diagonal, an in-block scan; L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<Lru>(c.input_size, c.hidden_size, c.num_layers, c.dropout);
                     }});
  entries.push_back({"ssm", "diagonal selective SSM step as in Mamba (N = 4 states per channel), an in-block scan; L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<SelectiveSsm>(c.input_size, c.hidden_size, c.num_layers, c.dropout);
                     }});
  return entries;
}

std::vector<ModelEntry>& registry() {
  static std::vector<ModelEntry> entries = builtin_models();  // register_builtins, once
  return entries;
}

}  // namespace

const std::vector<ModelEntry>& model_registry() { return registry(); }

std::vector<std::string> model_kinds() {
  std::vector<std::string> kinds;
  for (const auto& entry : registry()) kinds.push_back(entry.kind);
  return kinds;
}

void add_model(const std::string& kind, const std::string& summary, ModelFactory make) {
  TORCH_CHECK(!kind.empty(), "add_model kind: expected a non-empty name, got \"\"");
  TORCH_CHECK(make, "add_model make: expected a factory for kind \"", kind, "\", got none");
  for (const auto& entry : registry()) {
    TORCH_CHECK(entry.kind != kind, "add_model kind: \"", kind,
                "\" is already registered; known kinds: ",
                fmt::format("{}", fmt::join(model_kinds(), ", ")));
  }
  registry().push_back({kind, summary, std::move(make)});
}

std::shared_ptr<RecurrentModule> make_model(const ModelConfig& config) {
  for (const auto& entry : registry()) {
    if (entry.kind == config.kind) return entry.make(config);
  }
  TORCH_CHECK(false, "model: unknown kind \"", config.kind, "\"; known kinds: ",
              fmt::format("{}", fmt::join(model_kinds(), ", ")));
}

}  // namespace vlrnn
