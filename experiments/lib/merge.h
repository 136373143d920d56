#pragma once
// Merging shard folders (`vlrnn sweep --shard I/N`, lib/shard.h) into one result folder
// that reads like a single-machine sweep: records in sweep order, one per point.
//
// NOTE [ What a merge checks ]: every shard must come from the same config (its hash),
// the same commit and the same devices (the same description per device name), and be
// split the same number of ways — otherwise the points would not be comparable, and the
// merge stops naming the first folder that differs. A point recorded twice (a shard re-run,
// or resumed after a kill) is kept once: the first "ok" record, else the first one. A point
// no folder records is missing; the partition (a pure function of the config) says which
// shard owes it, so exactly that array task can be resubmitted. A shard folder that does
// not exist or has no meta.json (the task never started) owes all of its points.

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace vlrnn::experiments {

struct MergeOptions {
  std::string out_dir;                  // created when missing; must not be a shard folder
  std::vector<std::string> shard_dirs;  // in any order
  std::string command;                  // the merge command line, recorded in meta.json
};

struct MergeReport {
  int64_t shards = 0;         // N, the sweep split N ways
  int64_t folders = 0;        // shard folders read (each named once)
  int64_t total = 0;          // points in the config's grid
  int64_t merged = 0;         // records written to the merged results.jsonl
  int64_t duplicates = 0;     // records dropped as a repeat of a point already taken
  std::vector<std::string> absent_dirs;                  // no meta.json: never started?
  std::map<int64_t, std::vector<std::string>> missing;   // shard index -> keys it owes
  std::vector<std::string> unknown_keys;                 // recorded, but not in the grid
  int64_t missing_count() const;
  bool complete() const { return missing.empty(); }
};

// Writes results.jsonl, results.csv and meta.json into options.out_dir (also when points
// are missing: meta.json then says "incomplete" and lists them). Throws on mismatched
// shards (see the NOTE) and on unusable arguments.
MergeReport merge_shards(const MergeOptions& options);

}  // namespace vlrnn::experiments
