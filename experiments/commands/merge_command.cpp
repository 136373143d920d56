#include "commands/command.h"

#include "lib/merge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>

namespace vlrnn::cli {
namespace {

// Exit status of a merge that wrote what there was but lacks points (a shard to resubmit).
constexpr int kIncomplete = 3;

struct MergeArgs {
  std::string out_dir;
  std::vector<std::string> shard_dirs;
};

void print_missing(const experiments::MergeReport& report) {
  std::cerr << fmt::format("vlrnn merge: INCOMPLETE: {} of {} points missing\n", report.missing_count(),
                           report.total);
  std::vector<int64_t> owing;
  for (const auto& [shard, keys] : report.missing) {
    owing.push_back(shard);
    std::cerr << fmt::format("  shard {}/{} owes {} points, e.g. {}\n", shard, report.shards, keys.size(),
                             keys.front());
  }
  std::cerr << fmt::format(
      "hint: rerun those shards (`vlrnn sweep CONFIG --shard I/{} --out DIR --resume`, or "
      "`scripts/slurm/submit.sh CONFIG {} --only {}`), then merge again\n",
      report.shards, report.shards, fmt::join(owing, ","));
}

int run_merge_command(const MergeArgs& args) {
  experiments::MergeOptions options;
  options.out_dir = args.out_dir;
  options.shard_dirs = args.shard_dirs;
  options.command = command_line();
  const auto report = experiments::merge_shards(options);
  for (const auto& dir : report.absent_dirs) {
    std::cerr << "vlrnn merge: warning: " << dir << " holds no meta.json (a shard that never started?)\n";
  }
  if (!report.unknown_keys.empty()) {
    std::cerr << fmt::format("vlrnn merge: warning: {} records are not points of the config (kept at the end), "
                             "e.g. {}\n", report.unknown_keys.size(), report.unknown_keys.front());
  }
  std::cerr << fmt::format("vlrnn merge: {} of {} points from {} folders (sweep split {} ways), {} duplicate "
                           "records dropped -> {}/results.jsonl, results.csv, meta.json\n",
                           report.merged - int64_t(report.unknown_keys.size()), report.total,
                           report.folders, report.shards, report.duplicates,
                           args.out_dir);
  if (!report.complete()) {
    print_missing(report);
    return kIncomplete;
  }
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MergeArgs>();
  auto* sub = add_subcommand(
      app, "merge", "Join the shard folders of a sharded sweep into one result folder",
      "Join the shard folders of a sharded sweep (`vlrnn sweep CONFIG --shard I/N --out DIR`) into one "
      "result folder OUT that scripts/plot.py draws like a single-machine sweep: one record per point, in "
      "sweep order (a point recorded twice is kept once). Refuses shards of different configs, commits or "
      "devices. Points no folder holds are listed with the shard that owes them; the merge then still "
      "writes what there is, marks OUT/meta.json \"incomplete\" and exits 3.");
  sub->add_option("out", args->out_dir, "the merged result folder (its results are replaced)")->required();
  sub->add_option("dirs", args->shard_dirs, "the shard folders")->required();
  sub->callback([args, &exit_code] { exit_code = run_merge_command(*args); });
}

}  // namespace vlrnn::cli
