#pragma once
// Reading a JSON config one field at a time, with errors that name the field's path
// ("config experiments[0].T: expected an integer >= 1, got a string ("64")"): the sweep
// configs and the training configs read their values through these.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::experiments::json_fields {

using json = nlohmann::json;

// The JSON in the file at `path` (comments allowed); throws naming the file when it cannot
// be read or is not valid JSON.
json read_json_file(const std::string& path);
// The same for JSON text read from `source` (a file name, for the error): what the fuzz
// targets (tests/fuzz/) feed bytes to.
json parse_json_text(const std::string& text, const std::string& source);

// Throws "config PATH: MESSAGE".
[[noreturn]] void fail(const std::string& path, const std::string& message);
// "an integer", "a string", ...: what a value is, for error messages.
std::string type_of(const json& v);
// The value as JSON text, cut to 60 characters.
std::string shown(const json& v);

int64_t read_int(const json& v, const std::string& path, int64_t min);
double read_positive_number(const json& v, const std::string& path);
// A size in MiB (a positive number; fractions allowed) as bytes, rounded: throws unless that
// is at least 1 byte and at most 2^62 (a larger one would overflow the byte counts).
int64_t read_mib(const json& v, const std::string& path);
// A number in [min, max].
double read_number(const json& v, const std::string& path, double min, double max);
// A list of integers, or one integer read as a list of one.
std::vector<int64_t> read_int_list(const json& v, const std::string& path, int64_t min,
                                   bool allow_empty);
// A string, one of `allowed` when that is not empty.
std::string read_string(const json& v, const std::string& path,
                        const std::vector<std::string>& allowed = {});
std::vector<std::string> read_string_list(const json& v, const std::string& path,
                                          const std::vector<std::string>& allowed = {});
bool read_bool(const json& v, const std::string& path);
// A key an older config spelled otherwise, and what to say instead of "unknown key": a
// config written before the rename fails naming the new key rather than listing them all.
struct RenamedKey {
  std::string key;      // the old spelling
  std::string message;  // e.g. "renamed to \"task.time_steps\" (the sequence length T)"
};

// Throws naming the first key of `object` that is in `renamed` (with its message) or not in
// `known`. `path` "" is the top level: its keys are named bare ("steps", not ".steps").
void check_keys(const json& object, const std::string& path, const std::vector<std::string>& known,
                const std::vector<RenamedKey>& renamed = {});

}  // namespace vlrnn::experiments::json_fields
