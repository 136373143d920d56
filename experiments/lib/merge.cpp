#include "lib/merge.h"

#include "lib/results_store.h"
#include "lib/shard.h"
#include "lib/source_stamp.h"
#include "lib/sweep_config.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <set>

namespace vlrnn::experiments {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ShardFolder {
  std::string dir;
  json meta;
  ShardSpec shard;
};

std::string text_of(const json& meta, const char* key) {
  if (!meta.contains(key)) return "(none)";
  return meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump();
}

// Step 1: the folders that hold a shard (a meta.json); the others are reported absent.
std::vector<ShardFolder> read_folders(const MergeOptions& options, MergeReport& report) {
  TORCH_CHECK(!options.shard_dirs.empty(), "merge DIR...: expected at least one shard folder, got none");
  std::vector<ShardFolder> folders;
  std::set<fs::path> seen;
  for (const auto& dir : options.shard_dirs) {
    std::error_code error;
    const bool is_out = fs::exists(options.out_dir, error) && fs::equivalent(dir, options.out_dir, error);
    TORCH_CHECK(!is_out, "merge OUT: expected a folder other than the shard folders, got \"", dir,
                "\" as both (the merge replaces OUT's results)");
    if (!seen.insert(fs::weakly_canonical(dir, error)).second) continue;  // named twice
    if (!fs::is_directory(dir, error) || !fs::exists(fs::path(dir) / "meta.json", error)) {
      report.absent_dirs.push_back(dir);
      continue;
    }
    const json meta = ResultsStore(dir).read_meta();
    TORCH_CHECK(meta.contains("config_hash") && meta.contains("config"), "merge DIR: expected \"", dir,
                "/meta.json\" of a `vlrnn sweep` with a config_hash, got none (a sweep from an older "
                "vlrnn, or not a sweep folder)");
    const json shard = meta.value("shard", json{{"index", 0}, {"count", 1}});
    folders.push_back({dir, meta, {shard.value("index", int64_t(0)), shard.value("count", int64_t(1))}});
  }
  TORCH_CHECK(!folders.empty(), "merge DIR...: expected at least one folder with a meta.json, got none among ",
              options.shard_dirs.size(), " (did every shard fail before it started?)");
  return folders;
}

// Step 2: see NOTE [ What a merge checks ].
void check_shards_of_one_sweep(const std::vector<ShardFolder>& folders) {
  const auto& first = folders.front();
  for (const auto& f : folders) {
    for (const char* key : {"config_hash", "git_sha"}) {
      TORCH_CHECK(text_of(f.meta, key) == text_of(first.meta, key), "merge: expected every shard with ", key,
                  " ", text_of(first.meta, key), " (as in ", first.dir, "), got ", text_of(f.meta, key), " in ",
                  f.dir, ": shards of different ", key == std::string("git_sha") ? "commits" : "configs",
                  " cannot be merged");
    }
    TORCH_CHECK(f.shard.index >= 0 && f.shard.index < f.shard.count, "merge: expected a shard index in [0, ",
                f.shard.count, "), got ", f.shard.str(), " in ", f.dir, "/meta.json");
    TORCH_CHECK(f.shard.count == first.shard.count, "merge: expected every shard of a sweep split ",
                first.shard.count, " ways (as in ", first.dir, "), got ", f.shard.str(), " in ", f.dir);
    const json devices = f.meta.value("devices", json::object());
    const json first_devices = first.meta.value("devices", json::object());
    for (const auto& item : devices.items()) {
      // A shard with no points measured no device: only names both have are compared.
      if (!first_devices.contains(item.key())) continue;
      TORCH_CHECK(first_devices[item.key()] == item.value(), "merge: expected device ", item.key(), " to be ",
                  first_devices[item.key()].dump(), " (as in ", first.dir, "), got ", item.value().dump(),
                  " in ", f.dir, ": shards measured on different devices cannot be merged");
    }
  }
}

bool is_ok(const json& record) { return record.value("status", std::string("ok")) == "ok"; }

// Step 3: one record per point, in sweep order; duplicates dropped, missing points found.
std::vector<json> collect_records(const std::vector<ShardFolder>& folders, const std::vector<SweepPoint>& points,
                                  const std::vector<int64_t>& shard_of, MergeReport& report) {
  std::map<std::string, json> by_key;
  std::vector<std::string> arrival;  // first-seen order, for keys not in the grid
  for (const auto& f : folders) {
    for (auto& record : ResultsStore(f.dir).read_records()) {
      const std::string key = record.value("key", std::string());
      const auto it = by_key.find(key);
      if (it == by_key.end()) {
        arrival.push_back(key);
        by_key.emplace(key, std::move(record));
        continue;
      }
      ++report.duplicates;
      if (!is_ok(it->second) && is_ok(record)) it->second = std::move(record);
    }
  }
  std::vector<json> merged;
  std::set<std::string> grid;
  for (size_t i = 0; i < points.size(); ++i) {
    grid.insert(points[i].key);
    const auto it = by_key.find(points[i].key);
    if (it == by_key.end()) report.missing[shard_of[i]].push_back(points[i].key);
    else merged.push_back(it->second);
  }
  for (const auto& key : arrival) {
    if (grid.count(key)) continue;
    report.unknown_keys.push_back(key);
    merged.push_back(by_key[key]);
  }
  return merged;
}

// Step 4: the merged meta.json: the first shard's (config, environment), plus where each
// part came from and what is missing.
json merged_meta(const std::vector<ShardFolder>& folders, const MergeOptions& options, const MergeReport& report) {
  json meta = folders.front().meta;
  for (const char* key : {"shard", "previous_runs", "points_already_recorded", "points_measured", "points_failed"}) {
    meta.erase(key);
  }
  json parts = json::array();
  json devices = json::object();
  // Dirty if any shard was; else unknown if any was (NOTE [ Provenance from the build ]).
  SourceTree tree = SourceTree::clean;
  std::string started = meta.value("started", std::string()), finished;
  for (const auto& f : folders) {
    parts.push_back({{"dir", f.dir}, {"shard", f.shard.str()}, {"status", f.meta.value("status", json())},
                     {"host", f.meta.value("host", json())}, {"started", f.meta.value("started", json())},
                     {"finished", f.meta.value("finished", json())}, {"git_dirty", f.meta.value("git_dirty", json())},
                     {"peak_gemm", f.meta.value("peak_gemm", json())}, {"command", f.meta.value("command", json())}});
    devices.update(f.meta.value("devices", json::object()));
    const auto shard_tree = source_tree_of(f.meta.value("git_dirty", json()));
    if (shard_tree == SourceTree::dirty || (shard_tree == SourceTree::unknown && tree == SourceTree::clean)) {
      tree = shard_tree;
    }
    const auto s = f.meta.value("started", std::string());
    const json end = f.meta.value("finished", json());
    const auto e = end.is_string() ? end.get<std::string>() : std::string();
    if (!s.empty() && (started.empty() || s < started)) started = s;
    if (e > finished) finished = e;  // ISO 8601 UTC: text order is time order
  }
  json missing = json::object();
  for (const auto& [shard, keys] : report.missing) missing[std::to_string(shard)] = keys;
  meta.update({{"merged_from", parts}, {"absent_shard_dirs", report.absent_dirs}, {"devices", devices},
               {"git_dirty", git_dirty_json(tree)}, {"started", started}, {"finished", finished.empty() ? json() : json(finished)},
               {"status", report.complete() ? "complete" : "incomplete"}, {"points_total", report.total},
               {"points_merged", report.merged}, {"points_missing", report.missing_count()},
               {"missing_by_shard", missing}, {"duplicates_dropped", report.duplicates},
               {"command", options.command}});
  return meta;
}

}  // namespace

int64_t MergeReport::missing_count() const {
  int64_t n = 0;
  for (const auto& [shard, keys] : missing) n += int64_t(keys.size());
  return n;
}

MergeReport merge_shards(const MergeOptions& options) {
  MergeReport report;
  const auto folders = read_folders(options, report);
  check_shards_of_one_sweep(folders);
  const json& meta = folders.front().meta;
  const auto config = parse_sweep_config(meta["config"], meta.value("config_name", std::string("sweep")));
  TORCH_CHECK(config_hash(config) == meta["config_hash"].get<std::string>(), "merge: expected the config in ",
              folders.front().dir, "/meta.json to hash to its config_hash ", meta["config_hash"].get<std::string>(),
              ", got ", config_hash(config), " (meta.json edited, or a different vlrnn build?)");
  const auto points = expand_points(config);
  report.shards = folders.front().shard.count;
  report.folders = int64_t(folders.size());
  report.total = int64_t(points.size());
  const auto shard_of = assign_shards(config, points, report.shards);

  const auto records = collect_records(folders, points, shard_of, report);
  report.merged = int64_t(records.size());
  ResultsStore out(options.out_dir);
  out.replace_records(records);
  out.write_csv();
  out.write_meta(merged_meta(folders, options, report));
  return report;
}

}  // namespace vlrnn::experiments
