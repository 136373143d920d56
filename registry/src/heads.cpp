#include "vlrnn/registry/heads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

std::vector<HeadEntry>& mutable_heads() {
  static std::vector<HeadEntry> entries = builtin_heads();  // once, on first use
  return entries;
}

}  // namespace

const std::vector<HeadEntry>& head_registry() { return mutable_heads(); }

std::vector<std::string> head_kinds() {
  std::vector<std::string> kinds;
  for (const auto& entry : head_registry()) kinds.push_back(entry.kind);
  return kinds;
}

void add_head(const std::string& kind, const std::string& summary, HeadFactory make) {
  TORCH_CHECK(!kind.empty(), "add_head kind: expected a non-empty name, got \"\"");
  TORCH_CHECK(make, "add_head make: expected a factory for kind \"", kind, "\", got none");
  for (const auto& entry : head_registry()) {
    TORCH_CHECK(entry.kind != kind, "add_head kind: \"", kind,
                "\" is already registered; known kinds: ",
                fmt::format("{}", fmt::join(head_kinds(), ", ")));
  }
  mutable_heads().push_back({kind, summary, std::move(make)});
}

std::shared_ptr<OutputModule> make_head(const HeadConfig& config) {
  for (const auto& entry : head_registry()) {
    if (entry.kind == config.kind) return entry.make(config);
  }
  TORCH_CHECK(false, "head: unknown kind \"", config.kind, "\"; known kinds: ",
              fmt::format("{}", fmt::join(head_kinds(), ", ")));
}

std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs, bool sparse_targets) {
  return make_head(HeadConfig{kind, input_size, outputs, sparse_targets});
}

}  // namespace vlrnn
