#include "lib/user_models.h"

#include "vlrnn/core/script_head.h"
#include "vlrnn/core/script_model.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/models.h"

namespace vlrnn::experiments {

std::string add_model_file(const std::string& path, const std::string& argument) {
  for (const auto& kind : model_kinds()) {
    if (kind == path) return kind;
  }
  try {
    ScriptModel::load(path);  // checked now, so a bad file fails before anything runs
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, argument.empty() ? "" : argument + ": ", e.what_without_backtrace());
  }
  add_model(path, "TorchScript model " + path, [path](const ModelConfig&) {
    return std::static_pointer_cast<RecurrentModule>(ScriptModel::load(path));
  });
  return path;
}

std::string add_head_file(const std::string& path, const std::string& argument) {
  for (const auto& kind : head_kinds()) {
    if (kind == path) return kind;
  }
  try {
    ScriptHead::load(path);  // checked now, so a bad file fails before anything runs
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, argument.empty() ? "" : argument + ": ", e.what_without_backtrace());
  }
  add_head(path, "TorchScript head " + path, [path](const HeadConfig& config) {
    return std::static_pointer_cast<OutputModule>(ScriptHead::load(path, config.sparse_targets));
  });
  return path;
}

}  // namespace vlrnn::experiments
