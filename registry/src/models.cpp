#include "vlrnn/registry/models.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/registry.h"

#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/onednn_lstm.h"
#include "vlrnn/cells/gru_block.h"
#include "vlrnn/cells/lru.h"
#include "vlrnn/cells/min_rnn.h"
#include "vlrnn/cells/selective_ssm.h"
#include "vlrnn/core/bidirectional.h"
#include "vlrnn/core/layer_stack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {
namespace {

std::shared_ptr<RecurrentModule> make_torch_rnn(CellKind cell, const ModelConfig& config) {
  return std::make_shared<TorchRnn>(cell, config.input_size, config.hidden_size,
                                    config.num_layers, config.dropout);
}

// L bidirectional layers of one-layer LibTorch modules, dropout between them: LibTorch's
// bidirectional=true module, with the directions exposed (vlrnn/core/bidirectional.h).
std::shared_ptr<RecurrentModule> make_bidirectional_rnn(CellKind cell, const ModelConfig& config) {
  check_stack_config(config.input_size, config.hidden_size, config.num_layers, config.dropout);
  std::vector<Bidirectional::Directions> layers;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const int64_t in = l == 0 ? config.input_size : 2 * config.hidden_size;
    layers.emplace_back(std::make_shared<TorchRnn>(cell, in, config.hidden_size, 1),
                        std::make_shared<TorchRnn>(cell, in, config.hidden_size, 1));
  }
  return std::make_shared<Bidirectional>(std::move(layers), config.dropout);
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
           return std::make_shared<GruBlock>(variant, c.input_size, c.hidden_size, c.num_layers,
                                             c.dropout);
         }});
  }
  entries.push_back({"lstm_block",
                     "LSTM with a hand-written block backward, its layers on oneDNN where "
                     "PyTorch's nn.LSTM runs there (>= 2.1, float32, CPU); L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<LstmBlock>(c.input_size, c.hidden_size,
                                                          c.num_layers, c.dropout);
                     }});
  entries.push_back({"lstm_cells",
                     "lstm_block on its hand-written cells always, never on oneDNN (to set the "
                     "two side by side); L layers",
                     [](const ModelConfig& c) -> std::shared_ptr<RecurrentModule> {
                       return std::make_shared<LstmBlock>(c.input_size, c.hidden_size,
                                                          c.num_layers, c.dropout,
                                                          LstmSave::kGates, LstmRunner::kCells);
                     }});
  entries.push_back({"bilstm",
                     "bidirectional LSTM (LibTorch's, bidirectional=true); output [forward h_t, "
                     "backward h_t] (Z = 2H); L layers",
                     [](const ModelConfig& c) { return make_bidirectional_rnn(CellKind::kLstm, c); }});
  entries.push_back({"bigru",
                     "bidirectional GRU (LibTorch's, bidirectional=true); output [forward h_t, "
                     "backward h_t] (Z = 2H); L layers",
                     [](const ModelConfig& c) { return make_bidirectional_rnn(CellKind::kGru, c); }});
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

Registry<ModelEntry, &ModelEntry::kind> registered_models({"model", "kind", "kind"},
                                                          builtin_models);

}  // namespace

const std::vector<ModelEntry>& model_registry() { return registered_models.entries(); }

std::vector<std::string> model_kinds() { return registered_models.keys(); }

void add_model(const std::string& kind, const std::string& summary, ModelFactory make) {
  registered_models.add({kind, summary, std::move(make)});
}

void check_model_kind(const std::string& kind) {
  const auto registered = [](const std::string& name) {
    return registered_models.find(name) != nullptr;
  };
  if (registered(kind)) return;
  const std::string prefix = kBidirectionalPrefix;
  if (kind.rfind(prefix, 0) == 0) {
    const auto inner = kind.substr(prefix.size());
    TORCH_CHECK(!is_bidirectional_kind(inner), "model: \"", kind, "\": expected a "
                "left-to-right kind after \"", prefix, "\", got the bidirectional \"", inner, "\"");
    if (registered(inner)) return;
  }
  TORCH_CHECK(false, "model: unknown kind \"", kind, "\"; known kinds: ",
              fmt::format("{}", fmt::join(model_kinds(), ", ")), ", and ", prefix,
              "<kind> (a bidirectional wrapper of any left-to-right one)");
}

std::shared_ptr<RecurrentModule> make_model(const ModelConfig& config) {
  check_model_kind(config.kind);
  onednn_lstm_inference_agrees();  // NOTE [ oneDNN's LSTM inference, checked ]: before it runs
  if (const ModelEntry* entry = registered_models.find(config.kind)) return entry->make(config);
  const std::string prefix = kBidirectionalPrefix;
  if (config.kind.rfind(prefix, 0) == 0) {
    // One bidirectional layer whose directions are two independent `kind` models, each
    // built from the config (so each is itself L layers with its own dropout).
    ModelConfig inner = config;
    inner.kind = config.kind.substr(prefix.size());
    auto fwd = make_model(inner);
    auto bwd = make_model(inner);
    TORCH_CHECK(!as_bidirectional(*fwd), "model: \"", config.kind, "\": expected a "
                "left-to-right kind after \"", prefix, "\", got the bidirectional \"", inner.kind, "\"");
    return std::make_shared<Bidirectional>(
        std::vector<Bidirectional::Directions>{{std::move(fwd), std::move(bwd)}});
  }
  TORCH_CHECK(false, "model: unknown kind \"", config.kind, "\"");  // check_model_kind threw
}

}  // namespace vlrnn
