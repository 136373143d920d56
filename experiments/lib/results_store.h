#pragma once
// A result folder: results.jsonl (one JSON record per point, appended and flushed to disk
// as each point finishes — the source of truth), results.csv (rewritten from it, flat
// columns) and meta.json (what the measurements ran on).
//
// NOTE [ Nothing written is lost ]: each record is one write() of a whole line on a file
// opened O_APPEND, followed by fsync. A kill can only lose the point being measured; a
// torn last line (power loss mid-write) is skipped with a warning when the file is read,
// and the next append starts on a fresh line.

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace vlrnn::experiments {

// The version of the results schema (docs/architecture.md, "The results schema";
// scripts/results_schema.py checks it). Every meta.json and results file carries it.
constexpr int kResultsSchemaVersion = 3;

class ResultsStore {
 public:
  // Creates `directory` (and its parents) when missing.
  explicit ResultsStore(std::string directory);

  const std::string& directory() const { return directory_; }
  std::string jsonl_path() const;
  std::string csv_path() const;
  std::string meta_path() const;

  bool has_records() const;
  // Every record in results.jsonl, in order; unparsable lines are skipped with a warning
  // on stderr.
  std::vector<nlohmann::json> read_records() const;
  // The "key" of every record (what --resume skips).
  std::set<std::string> recorded_keys() const;

  void append(const nlohmann::json& record);
  // Several records in one write and one fsync (a training run logs a step at a time and
  // flushes them together).
  void append_all(const std::vector<nlohmann::json>& records);
  // Replaces results.jsonl with `records` (temp file + rename), for a merged result set.
  void replace_records(const std::vector<nlohmann::json>& records) const;
  // Rewrites results.csv from results.jsonl (temp file + rename: never half-written).
  void write_csv() const;
  // Writes meta.json: `meta` with schema_version set.
  void write_meta(nlohmann::json meta) const;
  nlohmann::json read_meta() const;  // {} when absent or unreadable

  // Moves results.jsonl, results.csv, meta.json and figures/ into previous/ (replacing
  // what was there): a fresh sweep into a used folder keeps the last one.
  void move_to_previous();

 private:
  std::string directory_;
};

// A result set in one file (compare --json, verify --json): {"meta": ..., "records": [...]},
// the meta with its schema_version and the records as a folder's meta.json and results.jsonl
// would hold them (temp file + rename). `argument` names the file in an error.
void write_results_file(const std::string& path, nlohmann::json meta,
                        const std::vector<nlohmann::json>& records, const std::string& argument);

// Throws naming `argument` when a file at `path` cannot be created or written (checked
// before a long run, not after it): the file is created empty if it did not exist.
void check_writable_file(const std::string& path, const std::string& argument);

// Flattens nested objects into dotted column names ({"time_s": {"median": 1}} ->
// "time_s.median"); lists become JSON text. Columns appear in first-seen order.
std::string records_to_csv(const std::vector<nlohmann::json>& records);

}  // namespace vlrnn::experiments
