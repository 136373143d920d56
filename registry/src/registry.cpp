#include "vlrnn/registry/registry.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn::registry_errors {

void check_addable(const RegistryWords& words, const std::string& key, bool has_factory,
                   const std::vector<std::string>& known) {
  TORCH_CHECK(!key.empty(), "add_", words.registry, " ", words.key,
              ": expected a non-empty name, got \"\"");
  TORCH_CHECK(has_factory, "add_", words.registry, " make: expected a factory for ", words.item,
              " \"", key, "\", got none");
  for (const auto& taken : known) {
    TORCH_CHECK(taken != key, "add_", words.registry, " ", words.key, ": \"", key,
                "\" is already registered; known ", words.item, "s: ",
                fmt::format("{}", fmt::join(known, ", ")));
  }
}

void throw_unknown(const RegistryWords& words, const std::string& key,
                   const std::vector<std::string>& known) {
  TORCH_CHECK(false, words.registry, ": unknown ", words.key, " \"", key, "\"; known ", words.item,
              "s: ", fmt::format("{}", fmt::join(known, ", ")));
}

}  // namespace vlrnn::registry_errors
