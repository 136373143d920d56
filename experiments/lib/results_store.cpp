#include "lib/results_store.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace vlrnn::experiments {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

void write_atomically(const std::string& path, const std::string& text,
                      const std::string& argument = "results") {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    TORCH_CHECK(out, argument, ": cannot write \"", tmp, "\"");
    out << text;
    out.flush();
    TORCH_CHECK(out, argument, ": writing \"", tmp, "\" failed");
  }
  std::error_code error;
  fs::rename(tmp, path, error);
  TORCH_CHECK(!error, argument, ": cannot replace \"", path, "\": ", error.message());
}

json with_schema_version(json meta) {
  meta["schema_version"] = kResultsSchemaVersion;
  return meta;
}

void flatten(const json& value, const std::string& prefix, std::vector<std::string>& columns,
             std::map<std::string, std::string>& row) {
  if (value.is_object()) {
    for (const auto& item : value.items()) {
      flatten(item.value(), prefix.empty() ? item.key() : prefix + "." + item.key(), columns, row);
    }
    return;
  }
  if (std::find(columns.begin(), columns.end(), prefix) == columns.end()) columns.push_back(prefix);
  if (value.is_null()) row[prefix] = "";
  else if (value.is_string()) row[prefix] = value.get<std::string>();
  else row[prefix] = value.dump();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

ResultsStore::ResultsStore(std::string directory) : directory_(std::move(directory)) {
  std::error_code error;
  fs::create_directories(directory_, error);
  TORCH_CHECK(!error && fs::is_directory(directory_), "--out: cannot create the folder \"",
              directory_, "\": ", error.message());
}

std::string ResultsStore::jsonl_path() const { return (fs::path(directory_) / "results.jsonl").string(); }
std::string ResultsStore::csv_path() const { return (fs::path(directory_) / "results.csv").string(); }
std::string ResultsStore::meta_path() const { return (fs::path(directory_) / "meta.json").string(); }

bool ResultsStore::has_records() const {
  std::error_code error;
  return fs::exists(jsonl_path(), error) && fs::file_size(jsonl_path(), error) > 0;
}

std::vector<json> ResultsStore::read_records() const {
  std::vector<json> records;
  std::ifstream in(jsonl_path());
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      records.push_back(json::parse(line));
    } catch (const json::parse_error&) {
      std::cerr << "vlrnn: warning: " << jsonl_path() << " line " << number
                << " is not a whole JSON record (an interrupted write?); skipped\n";
    }
  }
  return records;
}

std::set<std::string> ResultsStore::recorded_keys() const {
  std::set<std::string> keys;
  for (const auto& record : read_records()) {
    if (record.contains("key") && record["key"].is_string()) keys.insert(record["key"].get<std::string>());
  }
  return keys;
}

void ResultsStore::append(const json& record) { append_all({record}); }

void ResultsStore::append_all(const std::vector<json>& records) {
  if (records.empty()) return;
  std::string line;
  for (const auto& record : records) line += record.dump() + "\n";
  const int fd = ::open(jsonl_path().c_str(), O_RDWR | O_CREAT | O_APPEND, 0644);
  TORCH_CHECK(fd >= 0, "results: cannot open \"", jsonl_path(), "\": ", std::strerror(errno));
  // A torn last line from an earlier crash must not swallow this record.
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, size - 1) == 1 && last != '\n') line = "\n" + line;
  }
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      TORCH_CHECK(false, "results: writing \"", jsonl_path(), "\" failed: ", reason);
    }
    written += size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
}

std::string records_to_csv(const std::vector<json>& records) {
  // The columns a reader looks for first; the rest follow in (sorted) first-seen order.
  std::vector<std::string> columns = {
      "experiment", "kind", "status", "method", "method_description", "model", "layers",
      "input", "H", "T", "B", "K", "dtype", "device", "time_s.median", "time_s.min",
      "time_s.max", "memory.iteration_peak_bytes", "memory.peak_rss_bytes", "useful_flops_per_s",
      "utilization", "flops.overhead", "error_vs_full.max_rel", "max_batch", "budget_bytes"};
  std::vector<std::map<std::string, std::string>> rows;
  for (const auto& record : records) {
    std::map<std::string, std::string> row;
    flatten(record, "", columns, row);
    rows.push_back(std::move(row));
  }
  // Preferred columns no record has are dropped.
  std::vector<std::string> used;
  for (const auto& column : columns) {
    for (const auto& row : rows) {
      if (row.count(column)) {
        used.push_back(column);
        break;
      }
    }
  }
  columns = used;
  std::ostringstream out;
  for (size_t c = 0; c < columns.size(); ++c) out << (c ? "," : "") << csv_field(columns[c]);
  out << "\n";
  for (const auto& row : rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto it = row.find(columns[c]);
      out << (c ? "," : "") << (it == row.end() ? "" : csv_field(it->second));
    }
    out << "\n";
  }
  return out.str();
}

void ResultsStore::replace_records(const std::vector<json>& records) const {
  std::string text;
  for (const auto& record : records) text += record.dump() + "\n";
  write_atomically(jsonl_path(), text);
}

void ResultsStore::write_csv() const { write_atomically(csv_path(), records_to_csv(read_records())); }

void ResultsStore::write_meta(json meta) const {
  write_atomically(meta_path(), with_schema_version(std::move(meta)).dump(2) + "\n");
}

void write_results_file(const std::string& path, json meta, const std::vector<json>& records,
                        const std::string& argument) {
  const json document = {{"meta", with_schema_version(std::move(meta))}, {"records", records}};
  write_atomically(path, document.dump(2) + "\n", argument);
}

json ResultsStore::read_meta() const {
  std::ifstream in(meta_path());
  if (!in) return json::object();
  try {
    return json::parse(in);
  } catch (const json::parse_error&) {
    return json::object();
  }
}

void ResultsStore::move_to_previous() {
  const fs::path previous = fs::path(directory_) / "previous";
  std::error_code error;
  fs::remove_all(previous, error);
  fs::create_directories(previous, error);
  TORCH_CHECK(!error, "results: cannot create \"", previous.string(), "\": ", error.message());
  for (const char* name : {"results.jsonl", "results.csv", "meta.json", "figures"}) {
    const fs::path from = fs::path(directory_) / name;
    if (fs::exists(from, error)) fs::rename(from, previous / name);
  }
}

void check_writable_file(const std::string& path, const std::string& argument) {
  std::ofstream probe(path, std::ios::app);
  TORCH_CHECK(probe.good(), argument, ": expected a file that can be written, got \"", path,
              "\" (", std::strerror(errno), ")");
}

}  // namespace vlrnn::experiments
