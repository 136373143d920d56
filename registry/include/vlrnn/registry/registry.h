#pragma once
// The registry behind heads.h, models.h and methods.h: a list of named factories, the
// built-ins first, that a user adds to by name.
//
// NOTE [ One registry template ]
// Heads, models and methods are each a list of {name, summary, factory}, the built-ins
// registered on first use, a user's added after them, and an error naming the known names
// when a name is taken or unknown. Written three times, each fix to those rules had to be
// made three times; written once here, every registry checks, lists and fails the same way.
// Each keeps its own entry type (a model's `kind`, a method's `name`: callers read those
// fields) and its own words in the errors (RegistryWords).

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace vlrnn {

// How a registry names itself in its errors. With {"head", "kind", "kind"}:
//   add_head kind: "ce" is already registered; known kinds: ce, mse
//   add_head make: expected a factory for kind "x", got none
//   head: unknown kind "x"; known kinds: ce, mse
struct RegistryWords {
  const char* registry;  // "head": add_head, "head: unknown ..."
  const char* key;       // "kind" or "name": what a caller passes to pick an entry
  const char* item;      // "kind" or "method": "a factory for <item>", "known <item>s"
};

namespace registry_errors {
// A Registry's errors, in its words, thrown as c10::Error (TORCH_CHECK); `known` lists the
// keys in order. check_addable throws when `key` is empty or taken, or has no factory.
void check_addable(const RegistryWords& words, const std::string& key, bool has_factory,
                   const std::vector<std::string>& known);
// Always throws: `key` names no entry.
[[noreturn]] void throw_unknown(const RegistryWords& words, const std::string& key,
                                const std::vector<std::string>& known);
}  // namespace registry_errors

// `Entry` holds a key (the member `kKey`), a one-line `summary` and a factory `make`.
// Not thread-safe against a concurrent add(): add entries before using them.
template <typename Entry, std::string Entry::*kKey>
class Registry {
 public:
  using BuiltIns = std::vector<Entry> (*)();

  // constexpr, so a registry at namespace scope is ready before any static initialiser
  // runs: another file's initialiser may add to it (constant initialisation). `builtins`
  // runs on the first read or add, not at start-up: a static library drops an object file
  // nothing references, and a self-registration with it, so the built-ins are one list.
  constexpr Registry(RegistryWords words, BuiltIns builtins)
      : words_(words), builtins_(builtins) {}

  // Every entry, the built-ins first, then the added ones in the order they came.
  const std::vector<Entry>& entries() { return mutable_entries(); }

  std::vector<std::string> keys() {
    std::vector<std::string> keys;
    for (const auto& entry : entries()) keys.push_back(entry.*kKey);
    return keys;
  }

  // The entry named `key`, or nullptr.
  const Entry* find(const std::string& key) {
    for (const auto& entry : entries()) {
      if (entry.*kKey == key) return &entry;
    }
    return nullptr;
  }

  // The entry named `key`; throws listing the known keys when there is none.
  const Entry& at(const std::string& key) {
    if (const Entry* entry = find(key)) return *entry;
    registry_errors::throw_unknown(words_, key, keys());
  }

  // Appends `entry`; throws when its key is empty or taken, or it has no factory.
  void add(Entry entry) {
    registry_errors::check_addable(words_, entry.*kKey, static_cast<bool>(entry.make), keys());
    mutable_entries().push_back(std::move(entry));
  }

 private:
  std::vector<Entry>& mutable_entries() {
    // Once, even when two threads read first (as a function's static would be).
    std::call_once(builtins_added_, [this] { entries_.emplace(builtins_()); });
    return *entries_;
  }

  RegistryWords words_;
  BuiltIns builtins_;
  std::once_flag builtins_added_;
  std::optional<std::vector<Entry>> entries_;  // empty until the built-ins are in
};

}  // namespace vlrnn
