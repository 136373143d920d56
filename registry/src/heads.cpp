#include "vlrnn/registry/heads.h"

#include "vlrnn/registry/registry.h"

namespace vlrnn {
namespace {

// The built-in kinds, in the order head_kinds() lists them.
std::vector<HeadEntry> builtin_heads() {
  return {
      {"ce", "Linear + cross-entropy; targets [T, B] class indices",
       [](const HeadConfig& c) -> std::shared_ptr<OutputModule> {
         return std::make_shared<LinearCrossEntropyHead>(c.input_size, c.outputs, c.sparse_targets);
       }},
      {"mse", "Linear + squared error averaged over the outputs; targets [T, B, O]",
       [](const HeadConfig& c) -> std::shared_ptr<OutputModule> {
         return std::make_shared<LinearMseHead>(c.input_size, c.outputs, c.sparse_targets);
       }},
  };
}

Registry<HeadEntry, &HeadEntry::kind> registered_heads({"head", "kind", "kind"}, builtin_heads);

}  // namespace

const std::vector<HeadEntry>& head_registry() { return registered_heads.entries(); }

std::vector<std::string> head_kinds() { return registered_heads.keys(); }

void add_head(const std::string& kind, const std::string& summary, HeadFactory make) {
  registered_heads.add({kind, summary, std::move(make)});
}

std::shared_ptr<OutputModule> make_head(const HeadConfig& config) {
  return registered_heads.at(config.kind).make(config);
}

std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs, bool sparse_targets) {
  return make_head(HeadConfig{kind, input_size, outputs, sparse_targets});
}

}  // namespace vlrnn
