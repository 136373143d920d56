#include "commands/command.h"
#include "commands/measuring_options.h"
#include "commands/stop_signal.h"

#include "lib/recorded_plan.h"
#include "lib/sweep_runner.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

namespace vlrnn::cli {
namespace {

struct SweepArgs {
  std::string config_path;
  std::string out_dir;
  std::string shard;  // "I/N"; empty: the whole sweep
  bool resume = false;
  bool dry_run = false;
  std::string plan_file;  // a recorded plan registered as method "plan" (lib/recorded_plan.h)
  std::string device;     // empty: each experiment's own
  MeasuringArgs measuring;
};

int run_sweep_command(const SweepArgs& args) {
  apply_threads(args.measuring);
  // Before the config: its experiments may name method "plan".
  if (!args.plan_file.empty()) experiments::add_plan_method(args.plan_file);
  if (!args.device.empty()) experiments::parse_device(args.device, "--device");
  const auto config = experiments::load_sweep_config(args.config_path, args.device);
  experiments::SweepOptions options;
  if (!args.shard.empty()) options.shard = experiments::parse_shard(args.shard);
  auto points = experiments::expand_points(config);
  if (options.shard.sharded()) points = experiments::points_of_shard(config, points, options.shard);
  options.out_dir = args.out_dir.empty()
                        ? (std::filesystem::path("results") / config.name).string()
                        : args.out_dir;
  options.resume = args.resume;
  options.command = command_line();
  options.stop_requested = [] { return StopOnSignal::requested(); };

  std::cerr << fmt::format("vlrnn sweep: {} ({} experiments, {} points{}) -> {}\n", config.name,
                           config.experiments.size(), points.size(),
                           options.shard.sharded() ? " in shard " + options.shard.str() : "", options.out_dir);
  for (const auto& e : config.experiments) {
    std::cerr << fmt::format("  {} [{}]: {}\n", e.name, e.kind, fmt::join(e.methods, " "));
  }
  if (args.dry_run) {
    for (const auto& point : points) std::cout << point.key << "\n";
    return 0;
  }
  check_clean_tree(args.measuring, "vlrnn sweep");
  // NOTE [ Stopping a long run ]
  const auto summary = [&] {
    StopOnSignal stop("\nvlrnn sweep: stopping after the current point (send it again to stop now)\n");
    return experiments::run_sweep(config, options);
  }();

  std::cerr << fmt::format(
      "vlrnn sweep: {}: {} points measured ({} out of memory or failed), {} already recorded, "
      "{} total -> {}/results.jsonl, results.csv, meta.json\n",
      summary.interrupted ? "interrupted" : "done", summary.measured, summary.failed,
      summary.skipped, summary.total, options.out_dir);
  if (summary.interrupted) {
    std::cerr << "hint: run the same command with --resume to measure the rest\n";
    return 130;
  }
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SweepArgs>();
  auto* sub = add_subcommand(
      app, "sweep", "Measure a grid of points from a JSON config into a result folder (--shard I/N: one part)",
      "Measure a grid of points from a JSON config (methods x models x T x batch x block "
      "length x hidden x layers; see experiments/configs/quick.json and "
      "experiments/lib/sweep_config.h for every key). Each point appends one JSON record to "
      "DIR/results.jsonl as it finishes (flushed to disk), then DIR/results.csv is rewritten; "
      "DIR/meta.json records the git sha, device, LibTorch version, BLAS, nproc, the peak GEMM "
      "rate, this command line and the whole config. A point that runs out of memory or fails "
      "is recorded with its status and the sweep goes on. Experiments of kind \"max_batch\" "
      "search, per method, the largest batch whose memory stays under a budget and measure "
      "the throughput there. Ctrl-C stops after the current point; nothing written is lost.");
  sub->add_option("config", args->config_path, "the sweep's JSON config file")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", args->out_dir,
                  "result folder (default: results/<config name>); without --resume, results "
                  "already there move to DIR/previous/");
  sub->add_flag("--resume", args->resume,
                "continue the sweep in DIR: skip every point results.jsonl already records");
  sub->add_option("--plan", args->plan_file,
                  "FILE: register the plan a planner run recorded in FILE (its record's "
                  "\"plan\") as method 'plan', which the config's experiments may name; it runs "
                  "only at the T it was planned for")
      ->check(CLI::ExistingFile);
  sub->add_option("--shard", args->shard,
                  "I/N: run only the I-th (from 0) of N disjoint parts of the points, balanced by "
                  "predicted cost, into its own DIR (one Slurm array task each; scripts/slurm/); "
                  "`vlrnn merge` joins the parts");
  sub->add_flag("--dry-run", args->dry_run, "list the points (their keys; the shard's with --shard) and exit");
  add_device_option(sub, args->device,
                    "every experiment's device, in place of the config's \"device\" keys");
  add_measuring_options(sub, args->measuring);
  sub->callback([args, &exit_code] { exit_code = run_sweep_command(*args); });
}

}  // namespace vlrnn::cli
