#pragma once
// A method spec as written on a command line or in a config, "vlrnn:block_length=64" or
// "tbptt:k1=8,k2=16": its name and integer options, read here without building the method
// (vlrnn/registry/methods.h builds it). Needs no LibTorch beyond c10's errors, so the fuzz
// target for specs (tests/fuzz/registry/) builds in seconds.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vlrnn {

// Integer options by name: "vlrnn:block_length=64".
// A factory take()s what it understands; finish() rejects anything left over.
class MethodParams {
 public:
  MethodParams() = default;
  MethodParams(std::initializer_list<std::pair<const std::string, int64_t>> values)
      : values_(values) {}

  void set(const std::string& key, int64_t value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  // The value of `key` (removing it from the unread set), or `fallback` when absent.
  int64_t take(const std::string& key, int64_t fallback);
  // Throws naming each key no factory read, and the keys `method` knows.
  void finish(const std::string& method, const std::vector<std::string>& known) const;
  const std::map<std::string, int64_t>& values() const { return values_; }

 private:
  std::map<std::string, int64_t> values_;
  std::vector<std::string> read_;
};

struct MethodSpec {
  std::string name;  // the part before ':'
  MethodParams params;
};

// Splits "name" or "name:key=value,key=value" into the name and its options; throws (c10)
// naming the spec when an option is not key=integer.
MethodSpec parse_method_spec(const std::string& spec);

}  // namespace vlrnn
