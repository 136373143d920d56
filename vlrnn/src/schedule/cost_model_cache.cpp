#include "vlrnn/schedule/cost_model_cache.h"

#include "vlrnn/measure/environment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <type_traits>
#include <vector>

namespace vlrnn::schedule {
namespace {

namespace fs = std::filesystem;

// The first line of every file: what it is and in which format.
std::string header() { return fmt::format("vlrnn cost model, format {}", kCostModelFormat); }

// FNV-1a, 64 bits: a file name from a key, the same in every process and build.
uint64_t fnv1a(const std::string& text) {
  constexpr uint64_t kOffsetBasis = 14695981039346656037ull, kPrime = 1099511628211ull;
  uint64_t hash = kOffsetBasis;
  for (const unsigned char c : text) hash = (hash ^ c) * kPrime;
  return hash;
}

// One field as one line's value: numbers space-separated (a vector's length first), shortest
// round-trip text for doubles, a string as it is (it must not hold a line break).
template <typename V>
std::string field_text(const V& value) {
  if constexpr (std::is_same_v<V, std::string>) {
    std::string line = value;
    for (auto& c : line) c = c == '\n' ? ' ' : c;
    return line;
  } else if constexpr (std::is_same_v<V, bool>) {
    return value ? "1" : "0";  // as `in >> value` reads it
  } else if constexpr (std::is_arithmetic_v<V>) {
    return fmt::format("{}", value);
  } else {
    return fmt::format("{} {}", value.size(), fmt::join(value, " "));
  }
}

// Parses what field_text wrote; false on anything else (missing or extra numbers too).
template <typename V>
bool parse_field(const std::string& text, V& value) {
  if constexpr (std::is_same_v<V, std::string>) {
    value = text;
    return true;
  } else {
    std::istringstream in(text);
    if constexpr (std::is_arithmetic_v<V>) {
      if (!(in >> value)) return false;
    } else {
      size_t n = 0;
      if (!(in >> n) || n > text.size()) return false;  // a number needs at least a character
      value.resize(n);
      for (auto& v : value) {
        if (!(in >> v)) return false;
      }
    }
    in >> std::ws;
    return in.eof();
  }
}

// Removes the least recently used model files of `folder` beyond `max_files` (by their
// modification time: a read refreshes it). Files another process removes meanwhile, or
// that cannot be removed, are left to it.
void keep_most_recent(const fs::path& folder, size_t max_files) {
  std::error_code error;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    if (entry.path().extension() != ".txt") continue;
    const auto time = fs::last_write_time(entry.path(), error);
    if (!error) files.emplace_back(time, entry.path());
  }
  if (files.size() <= max_files) return;
  std::sort(files.begin(), files.end());  // oldest first
  for (size_t i = 0; i + max_files < files.size(); ++i) fs::remove(files[i].second, error);
}

}  // namespace

std::string cost_model_signature(const Workload& w) {
  const auto& x = w.batch.inputs;
  // Not the steps (NOTE [ Other batches of the workload ] in cost_model.cpp): B and F. Nor
  // the reduction: a mean is the sum divided once, and on the verification matrix's 184
  // workloads measured both ways every byte of the two models came out equal.
  std::string s = fmt::format("Tx{} {} {} x_grad={} h0_grad={}",
                              fmt::join(x.sizes().slice(1), "x"),
                              c10::toString(x.scalar_type()), x.device().str(),
                              x.requires_grad(), w.h0.requires_grad());
  int64_t head_params = 0;
  for (const auto& p : w.head.parameters()) head_params += p.numel();
  // The model's structure, not only its parameters' shapes: gru and gru_v1 .. gru_v4 have
  // the same shapes and different costs.
  s += fmt::format(" model={} head={}:{}:{}", w.model.describe(), w.head.name(), head_params,
                   w.head.input_size());
  // Which lengths does not matter, whether any do.
  if (w.batch.has_lengths()) s += " lengths";
  return s;
}

std::string workload_signature(const Workload& w) {
  std::string s = fmt::format("{} T={}", cost_model_signature(w), w.batch.time_steps());
  if (w.batch.has_lengths()) {
    const auto lengths = w.batch.lengths.to(torch::kCPU, torch::kLong).contiguous();  // [B]
    s += fmt::format(" lengths={}", fmt::join(std::vector<int64_t>(
        lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel()), ","));
  }
  return s;
}

std::string machine_description(const torch::Device& device) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fmt::format("host={} device={} libtorch={}", host, measure::describe_device(device),
                     measure::libtorch_version());
}

std::string cost_model_key(const Workload& workload) {
  return machine_description(workload.batch.inputs.device()) + " " +
         cost_model_signature(workload);
}

std::optional<fs::path> cost_model_cache_dir() {
  if (const char* dir = std::getenv("VLRNN_CACHE_DIR"); dir && *dir) {
    if (std::string(dir) == "off") return std::nullopt;
    return fs::path(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "vlrnn";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "vlrnn";
  }
  return std::nullopt;
}

fs::path cost_model_file(const fs::path& dir, const std::string& key) {
  return dir / "cost-models" / fmt::format("{:016x}.txt", fnv1a(key));
}

std::optional<CostModel> load_cost_model(const fs::path& dir, const std::string& key) {
  std::ifstream in(cost_model_file(dir, key));
  std::string line;
  if (!in || !std::getline(in, line) || line != header()) return std::nullopt;
  if (!std::getline(in, line) || line != "key " + key) return std::nullopt;
  std::map<std::string, std::string> fields;  // name -> its text
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    const auto name = line.substr(0, space);
    const auto text = space == std::string::npos ? std::string() : line.substr(space + 1);
    if (!fields.emplace(name, text).second) return std::nullopt;  // a field twice
  }
  CostModel model;
  size_t parsed = 0;
  bool ok = true;
  for_each_field(model, [&](const char* name, auto& value) {
    const auto it = fields.find(name);
    ok = ok && it != fields.end() && parse_field(it->second, value);
    ++parsed;
  });
  if (!ok || parsed != fields.size()) return std::nullopt;  // a field missing, or unknown
  try {
    model.check();
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  std::error_code error;  // recently used now (NOTE [ Cost models on disk ])
  fs::last_write_time(cost_model_file(dir, key), fs::file_time_type::clock::now(), error);
  return model;
}

bool store_cost_model(const fs::path& dir, const std::string& key, const CostModel& model,
                      size_t max_files) {
  const fs::path file = cost_model_file(dir, key);
  std::error_code error;
  fs::create_directories(file.parent_path(), error);
  if (error) return false;
  // A name of its own per writer: two processes storing one key each rename a whole file.
  const fs::path temporary = file.string() + fmt::format(".{}.{}.tmp", getpid(),
                                                         std::random_device()());
  {
    std::ofstream out(temporary);
    out << header() << "\n" << "key " << key << "\n";
    for_each_field(model, [&](const char* name, const auto& value) {
      out << name << " " << field_text(value) << "\n";
    });
    if (!out.flush()) {
      out.close();
      fs::remove(temporary, error);
      return false;
    }
  }
  fs::rename(temporary, file, error);
  if (error) {
    fs::remove(temporary, error);
    return false;
  }
  keep_most_recent(file.parent_path(), max_files);
  return true;
}

}  // namespace vlrnn::schedule
