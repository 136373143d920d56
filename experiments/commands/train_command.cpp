// `vlrnn train CONFIG [--out DIR] [--resume]`: trains every run of a config (lib/trainer.h).
#include "commands/command.h"
#include "commands/measuring_options.h"
#include "commands/stop_signal.h"

#include "lib/environment.h"
#include "lib/recorded_plan.h"
#include "lib/results_store.h"
#include "lib/tasks.h"
#include "lib/train_config.h"
#include "lib/trainer.h"
#include "lib/units.h"

#include "vlrnn/distributed/data_parallel.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <unistd.h>

namespace vlrnn::cli {
namespace {

using json = nlohmann::json;

struct TrainArgs {
  std::string config_path;
  std::string out_dir;
  bool resume = false;
  std::string plan_file;  // a recorded plan registered as method "plan" (lib/recorded_plan.h)
  std::string device;     // empty: the config's
  MeasuringArgs measuring;
};

// "[2/6 vlrnn:block_length=32|seed=1] step 120/500  loss 0.6931  eval 0.7012  ETA 3m10s": redrawn in
// place on a terminal (at most 5 times a second), one line every 30 s into a log file.
class ProgressLine {
 public:
  void show(const experiments::TrainProgress& p, size_t index, size_t runs) {
    const bool last = p.step == p.total_steps;
    const double since = std::chrono::duration<double>(Clock::now() - shown_).count();
    if (!last && since < (terminal_ ? 0.2 : 30.0)) return;
    shown_ = Clock::now();
    std::cerr << fmt::format("{}[{}/{} {}] step {}/{}  loss {:.4f}  eval {}{}  ETA {}   {}",
                             terminal_ ? "\r" : "", index + 1, runs, p.run, p.step, p.total_steps,
                             p.loss, p.eval_loss >= 0 ? fmt::format("{:.4f}", p.eval_loss) : "-",
                             p.eval_accuracy >= 0
                                 ? fmt::format(" (accuracy {:.1f} %)", 100 * p.eval_accuracy) : "",
                             experiments::format_duration(p.eta_s()), terminal_ && !last ? "" : "\n")
              << std::flush;
  }

  // Ends a run's line on a terminal (a run stopped by its time limit never shows its last
  // step as step == total).
  void finish() const {
    if (terminal_) std::cerr << "\n";
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool terminal_ = ::isatty(STDERR_FILENO) != 0;
  Clock::time_point shown_{};
};

// A fresh folder moves earlier results to previous/ and drops their checkpoints; --resume
// checks that the folder was trained with this very config. A folder from before the
// "steps" rename stored the old key names: read with today's, it is the same config (the
// checkpoints hold no key names), so it resumes.
void prepare_folder(const TrainArgs& args, const experiments::TrainConfig& config,
                    experiments::ResultsStore& store, const std::string& checkpoints) {
  if (!args.resume) {
    if (store.has_records()) store.move_to_previous();
    std::filesystem::remove_all(checkpoints);
    return;
  }
  const auto meta = store.read_meta();
  TORCH_CHECK(meta.empty() || !meta.contains("config") ||
                  experiments::with_current_key_names(meta["config"]) == config.source,
              "--resume: ", store.directory(), " was trained with a different config (meta.json's "
              "\"config\" differs from ", args.config_path, "); resume with the same config, or "
              "start afresh without --resume");
}

json start_meta(const TrainArgs& args, const experiments::TrainConfig& config,
                const experiments::Task& task, const experiments::ResultsStore& store) {
  auto meta = experiments::environment_json();
  experiments::warn_if_reference_blas(meta, "vlrnn train");
  const auto previous = store.read_meta();
  meta["kind"] = "train";
  meta["command"] = command_line();
  meta["config_path"] = args.config_path;
  meta["config_name"] = config.name;
  meta["config"] = config.source;
  meta["task"] = task.describe();
  meta["chance_loss"] = task.chance_loss();
  meta["flush_denormals"] = config.flush_denormals;
  meta["started"] = args.resume && previous.contains("started") ? previous["started"]
                                                                : json(experiments::utc_now());
  if (args.resume) meta["resumed"] = experiments::utc_now();
  meta["status"] = "running";
  return meta;
}

std::set<std::string> finished_runs(const experiments::ResultsStore& store) {
  std::set<std::string> done;
  for (const auto& r : store.read_records()) {
    if (r.value("kind", std::string()) == "train_run") done.insert(r.value("run", std::string()));
  }
  return done;
}

// Drops what `run` logged after its checkpoint (NOTE [ Resuming is bit-for-bit ]).
void trim_to_checkpoint(experiments::ResultsStore& store, const std::string& checkpoints,
                        const std::string& run) {
  const auto records = store.read_records();
  const auto kept = experiments::records_up_to(
      records, run, std::max<int64_t>(0, experiments::checkpoint_step(checkpoints, run)));
  if (kept.size() != records.size()) store.replace_records(kept);
}

void print_summary(const std::vector<json>& summaries) {
  std::cout << fmt::format("{:<34} {:>6} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "run",
                           "batch", "steps", "loss", "eval loss", "chance", "accuracy", "wall");
  for (const auto& s : summaries) {
    const auto accuracy = s.contains("final_eval_accuracy")
        ? fmt::format("{:.2f} %", 100 * s["final_eval_accuracy"].get<double>()) : "-";
    std::cout << fmt::format("{:<34} {:>6} {:>6} {:>10.4f} {:>10.4f} {:>10.4f} {:>9} {:>9}\n",
                             s["run"].get<std::string>(), s["batch"].get<int64_t>(),
                             s["steps"].get<int64_t>(), s["final_loss"].get<double>(),
                             s["final_eval_loss"].get<double>(), s["chance_loss"].get<double>(),
                             accuracy, experiments::format_duration(s["clock_s"].get<double>()));
  }
}

int run_train_command(const TrainArgs& args) {
  apply_threads(args.measuring);
  // Before the config: its runs may name method "plan".
  if (!args.plan_file.empty()) experiments::add_plan_method(args.plan_file);
  if (!args.device.empty()) experiments::parse_device(args.device, "--device");
  auto config = experiments::load_train_config(args.config_path, args.device);
  // NOTE [ Denormals in long backward passes ]: a loss scored only at the last of T = 784
  // steps sends a gradient back through hundreds of steps, shrinking at each, into the
  // subnormal floats, where the CPU's arithmetic runs many times slower (a sequential
  // Fashion-MNIST step of full BPTT took 2.1 s with them and 0.37 s with them flushed).
  // Flushing them to zero costs no accuracy a training run can see (values below 1e-38) and
  // changes every method's arithmetic alike, so exact methods still agree with full BPTT.
  // "flush_denormals": false in the config keeps IEEE's gradual underflow.
  at::globalContext().setFlushDenormal(config.flush_denormals);
  const auto task = experiments::make_task(config.task);
  const std::string out = args.out_dir.empty()
                              ? (std::filesystem::path("results") / config.name).string()
                              : args.out_dir;
  check_clean_tree(args.measuring, "vlrnn train");
  // Data-parallel when started as several ranks (torchrun's or Slurm's variables): rank 0
  // writes the folder, every rank trains its share (NOTE [ Data-parallel training ]).
  const auto group = ProcessGroupConfig::from_environment();
  config.device = group.device_of_rank(config.device, int64_t(torch::cuda::device_count()));
  const DataParallel ranks(group);
  experiments::ResultsStore store(out);
  const std::string checkpoints = out + "/checkpoints";
  auto meta = json::object();
  if (ranks.is_root()) {
    prepare_folder(args, config, store, checkpoints);
    meta = start_meta(args, config, *task, store);
    if (ranks.world_size() > 1) meta["world_size"] = ranks.world_size();
    store.write_meta(meta);
    std::cerr << fmt::format("vlrnn train: {} on {} ({} runs, {}) -> {}\n", config.name,
                             task->describe(), config.runs.size(), group.describe(), out);
  }
  // Also the barrier after rank 0 prepared the folder, before any rank reads it.
  ranks.check_agree("the config (" + args.config_path + ")", config.source.dump());

  const auto done = args.resume ? finished_runs(store) : std::set<std::string>();
  const StopOnSignal stop("\nvlrnn train: stopping after this step, with a checkpoint (send it "
                          "again to stop now)\n");
  std::vector<json> summaries;
  ProgressLine progress_line;
  bool interrupted = false;
  for (size_t i = 0; i < config.runs.size() && !interrupted; ++i) {
    const auto& run = config.runs[i];
    if (done.count(run.label())) continue;
    if (args.resume && ranks.is_root()) trim_to_checkpoint(store, checkpoints, run.label());
    experiments::TrainHooks hooks;
    // (train_run calls hooks.log on rank 0 alone; the others print nothing either.)
    hooks.log = [&](const std::vector<json>& records) { store.append_all(records); };
    if (ranks.is_root()) {
      hooks.progress = [&](const experiments::TrainProgress& p) {
        progress_line.show(p, i, config.runs.size());
      };
      hooks.message = [](const std::string& line) { std::cerr << line << "\n"; };
    }
    hooks.stop_requested = [] { return StopOnSignal::requested(); };
    const auto outcome =
        experiments::train_run(config, *task, run, checkpoints, args.resume, hooks, ranks);
    progress_line.finish();
    interrupted = !outcome.finished;
    if (outcome.finished) summaries.push_back(outcome.summary);
  }
  if (!ranks.is_root()) return interrupted ? 130 : 0;
  store.write_csv();
  meta["status"] = interrupted ? "interrupted" : "complete";
  meta["finished"] = experiments::utc_now();
  store.write_meta(meta);
  if (!summaries.empty()) print_summary(summaries);
  if (interrupted) {
    std::cerr << "vlrnn train: interrupted; run the same command with --resume to continue\n";
    return 130;
  }
  std::cerr << fmt::format("vlrnn train: done -> {}/results.jsonl, results.csv, meta.json\n", out);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  auto* sub = add_subcommand(
      app, "train", "Train a model on a task with each gradient method of a JSON config",
      "Train a model on a task (adding, copy / delayed recall, character-level language "
      "modelling on a text file, or sequential / permuted Fashion-MNIST from Debian's "
      "dataset-fashion-mnist; experiments/lib/tasks.h) with every method x seed of a JSON "
      "config (experiments/configs/train-*.json; every key in experiments/lib/train_config.h). "
      "Runs with the same seed start from the same weights and see the same batches. Every "
      "step appends a record to DIR/results.jsonl (loss, gradient norm, learning rate, step "
      "time, iteration peak memory, training clock; the held-out loss every eval_every steps, "
      "and the accuracy when the task classifies sequences); "
      "DIR/checkpoints/ holds each run's model, optimizer and generator states every "
      "checkpoint_every steps. Ctrl-C stops after the current step with a checkpoint; "
      "--resume continues every unfinished run on exactly the trajectory it was on. "
      "Started as several processes (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, "
      "or an srun step's SLURM_PROCID, SLURM_STEP_NUM_TASKS), it trains data-parallel over "
      "c10d's gloo: each rank takes its share of every batch, the gradients are summed once per step, and "
      "rank 0 writes DIR; a rank waits at most VLRNN_DIST_TIMEOUT_S (300) seconds for the "
      "others. On --device cuda, rank r of a machine trains on cuda:r (LOCAL_RANK, "
      "SLURM_LOCALID). docs/distributed.md.");
  sub->add_option("config", args->config_path, "the training config (JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", args->out_dir,
                  "result folder (default: results/<config name>); without --resume, results "
                  "already there move to DIR/previous/ and old checkpoints are deleted");
  sub->add_flag("--resume", args->resume,
                "continue the runs in DIR from their checkpoints (finished runs are skipped)");
  sub->add_option("--plan", args->plan_file,
                  "FILE: register the plan a planner run recorded in FILE (its record's "
                  "\"plan\", e.g. in a train results.jsonl or compare --json) as method 'plan', "
                  "which the config's runs may name: the same ops at every step, so a run (or a "
                  "resumed one) repeats bit for bit")
      ->check(CLI::ExistingFile);
  add_device_option(sub, args->device, "where the runs train, in place of the config's \"device\"");
  add_measuring_options(sub, args->measuring);
  sub->callback([args, &exit_code] { exit_code = run_train_command(*args); });
}

}  // namespace vlrnn::cli
