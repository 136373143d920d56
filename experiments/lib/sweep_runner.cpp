#include "lib/sweep_runner.h"

#include "lib/environment.h"
#include "lib/max_batch.h"
#include "lib/method_runner.h"
#include "lib/method_specs.h"
#include "lib/results_store.h"
#include "lib/shard.h"
#include "lib/sweep_plan.h"
#include "lib/units.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/measure/peak_gemm.h"
#include "vlrnn/measure/threads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string gemm_key(const ProblemSpec& p) { return p.device.str() + "/" + dtype_name(p.dtype); }

std::string point_label(const SweepPoint& point, const ExperimentSpec& e) {
  const auto& p = point.problem;
  return fmt::format("{}: {} L={} H={} T={} B={} {}", e.name, p.model, p.num_layers, p.hidden_size,
                     p.time_steps, e.kind == "max_batch" ? std::string("max") : std::to_string(p.batch),
                     point.method);
}

json base_record(const SweepPoint& point, const ExperimentSpec& e) {
  json record = {{"key", point.key},
                 {"experiment", e.name},
                 {"kind", e.kind},
                 {"figures", e.figures},
                 {"K", point.block > 0 ? json(point.block) : json()},
                 {"timestamp", utc_now()}};
  record.update(to_json(point.problem));
  return record;
}

json failed_record(const SweepPoint& point, const ExperimentSpec& e, const std::exception& error) {
  json record = base_record(point, e);
  record["method"] = point.method;
  record["status"] = measure::is_out_of_memory(error) ? "oom" : "error";
  record["error"] = measure::short_message(error);
  return record;
}


// Step 1: the points this run owes (its shard's, or all), minus those already recorded.
struct Plan {
  std::vector<SweepPoint> points;        // this run's share of the grid, in sweep order
  std::vector<const SweepPoint*> todo;   // of those, not yet in results.jsonl
  json previous_meta;                    // meta.json of the run being resumed ({} if none)
};

// --resume into a folder of another config or shard would mix two sweeps in one file.
void check_resumable_folder(const json& previous, const std::string& hash, const ShardSpec& shard,
                            const std::string& out_dir) {
  const std::string where = out_dir + "/meta.json";
  if (previous.contains("config_hash") && previous["config_hash"] != hash) {
    TORCH_CHECK(false, "--resume: expected a folder of this config (hash ", hash, "), got hash ",
                previous["config_hash"].get<std::string>(), " in ", where,
                " (a new sweep needs its own --out)");
  }
  if (previous.contains("shard")) {
    const ShardSpec before{previous["shard"].value("index", int64_t(0)), previous["shard"].value("count", int64_t(1))};
    TORCH_CHECK(before.index == shard.index && before.count == shard.count, "--shard: expected ",
                before.str(), " (what ", where, " records: one folder per shard), got ", shard.str());
  }
}

Plan plan_run(const SweepConfig& config, const SweepOptions& options, ResultsStore& store, SweepSummary& summary) {
  Plan plan;
  const auto all = expand_points(config);
  plan.points = options.shard.sharded() ? points_of_shard(config, all, options.shard) : all;
  summary.total = int64_t(plan.points.size());
  std::set<std::string> done_keys;
  if (options.resume) {
    plan.previous_meta = store.read_meta();
    check_resumable_folder(plan.previous_meta, config_hash(config), options.shard, options.out_dir);
    done_keys = store.recorded_keys();
  } else if (store.has_records()) {
    store.move_to_previous();
    std::cerr << "vlrnn sweep: " << options.out_dir << " held results; moved them to "
              << options.out_dir << "/previous/ (use --resume to continue a sweep instead)\n";
  }
  for (const auto& point : plan.points) {
    if (done_keys.count(point.key)) ++summary.skipped;
    else plan.todo.push_back(&point);
  }
  if (summary.skipped > 0) {
    std::cerr << fmt::format("vlrnn sweep: resuming: {} of {} points already recorded\n",
                             summary.skipped, summary.total);
  }
  return plan;
}

// Step 2: the peak GEMM rate of every device and dtype the run uses (utilization's
// denominator), measured before the memory cap applies.
struct PeakRates {
  json meta = json::object();
  std::map<std::string, double> rate;
};

PeakRates measure_peak_rates(const std::vector<SweepPoint>& points, const SweepOptions& options) {
  PeakRates peaks;
  const auto warning = measure::blas_warning(measure::detect_blas());
  if (!warning.empty()) std::cerr << "vlrnn sweep: WARNING: " << warning << "\n";
  for (const auto& point : points) {
    const auto key = gemm_key(point.problem);
    if (peaks.rate.count(key)) continue;
    std::cerr << "vlrnn sweep: measuring the peak GEMM rate on " << key << "...\n";
    const auto peak = measure::measure_peak_gemm(point.problem.device, point.problem.dtype,
                                                 options.peak_gemm_size, options.peak_gemm_repeats);
    peaks.rate[key] = peak.flops_per_second;
    peaks.meta[key] = peak_gemm_json(peak);
  }
  return peaks;
}

// Step 3: meta.json as the run starts (status "running"); finish_meta completes it.
json start_meta(const SweepConfig& config, const SweepOptions& options, const SweepSummary& summary,
                const Plan& plan, const PeakRates& peaks, const json& env) {
  json devices = json::object();
  for (const auto& point : plan.points) devices[point.problem.device.str()] = measure::describe_device(point.problem.device);
  json meta = {{"config_name", config.name},
               {"config_path", config.path},
               {"config_hash", config_hash(config)},
               {"config", config.raw},
               {"shard", {{"index", options.shard.index}, {"count", options.shard.count},
                          {"points", summary.total}}},
               {"command", options.command},
               {"working_directory", std::filesystem::current_path().string()},
               {"started", utc_now()},
               {"finished", nullptr},
               {"status", "running"},
               {"points_total", summary.total},
               {"points_already_recorded", summary.skipped},
               {"memory_limit_bytes", config.memory_limit_bytes},
               {"devices", devices},
               {"peak_gemm", peaks.meta}};
  meta.update(env);
  json experiments = json::array();
  for (const auto& e : config.experiments) {
    experiments.push_back({{"name", e.name}, {"kind", e.kind}, {"figures", e.figures}, {"methods", e.methods}});
  }
  meta["experiments"] = experiments;
  if (options.resume && !plan.previous_meta.empty()) {
    json previous = plan.previous_meta;
    json runs = previous.value("previous_runs", json::array());
    previous.erase("previous_runs");
    previous.erase("config");
    runs.push_back(previous);
    meta["previous_runs"] = runs;
  }
  return meta;
}

// Step 4: records each finished point (appended and flushed) and prints the progress line.
class Recorder {
 public:
  Recorder(const SweepConfig& config, ResultsStore& store, SweepSummary& summary, const Plan& plan)
      : config_(config), store_(store), summary_(summary), index_(summary.skipped) {
    for (const auto* point : plan.todo) total_cost_ += point_cost(*point, config.experiments[point->experiment]);
  }

  void progress(const std::string& label) const {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const double eta = done_cost_ > 0 ? elapsed * (total_cost_ - done_cost_) / done_cost_ : -1.0;
    std::cerr << fmt::format("[sweep {}/{} | {} elapsed | ETA {}] {}\n", index_, summary_.total,
                             format_duration(elapsed), eta >= 0 ? format_duration(eta) : "?", label);
  }

  void record(const json& r, const SweepPoint& point) {
    store_.append(r);
    store_.write_csv();
    ++summary_.measured;
    ++index_;
    const auto& e = config_.experiments[point.experiment];
    done_cost_ += point_cost(point, e);
    const std::string status = r.value("status", "ok");
    if (status != "ok") ++summary_.failed;
    std::string result = status;
    if (status == "ok" && r.contains("time_s")) {
      result = fmt::format("{} per iteration, iteration peak {}", format_seconds(r["time_s"]["median"].get<double>()),
                           format_bytes(r["memory"]["iteration_peak_bytes"].get<double>()));
    } else if (status != "ok") {
      result += ": " + r.value("error", std::string());
    }
    progress(point_label(point, e) + " -> " + result);
  }

 private:
  const SweepConfig& config_;
  ResultsStore& store_;
  SweepSummary& summary_;
  int64_t index_;
  double total_cost_ = 0.0, done_cost_ = 0.0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// Step 5a: a max_batch point: search the batch, then record the measurement there.
void run_max_batch_point(const SweepPoint& first, const ExperimentSpec& e, double peak, Recorder& recorder) {
  recorder.progress(point_label(first, e) + ": searching the batch under " + format_bytes(double(e.budget_bytes)));
  try {
    const auto outcome = find_max_batch(first.problem, first.method, e, peak,
                                        [](const std::string& line) { std::cerr << line << "\n"; });
    SweepPoint point = first;
    point.problem = outcome.problem;
    json r = base_record(point, e);
    r["budget_bytes"] = e.budget_bytes;
    r["max_batch"] = outcome.batch;
    json probes = json::array();
    for (const auto& p : outcome.probes) {
      probes.push_back({{"B", p.batch}, {"total_bytes", p.total_bytes >= 0 ? json(p.total_bytes) : json()},
                        {"fits", p.fits}});
    }
    r["probes"] = probes;
    if (outcome.run) {
      r.update(to_json(*outcome.run));
      if (outcome.run->status == "ok") r["total_bytes"] = outcome.run->workload_bytes + outcome.run->memory.iteration_peak_bytes;
    } else {
      r["method"] = first.method;
      r["status"] = "over_budget";
      r["error"] = fmt::format("batch {} already exceeds the budget", e.batch_start);
    }
    recorder.record(r, first);
  } catch (const std::exception& error) {
    recorder.record(failed_record(first, e, error), first);
  }
}

// Step 5b: a grid group: its methods on one problem, taking turns within each repeat.
void run_grid_group(const std::vector<const SweepPoint*>& group, const ExperimentSpec& e, double peak,
                    Recorder& recorder) {
  const auto& first = *group.front();
  std::vector<std::string> specs;
  for (const auto* point : group) specs.push_back(point->method);
  recorder.progress(fmt::format("{}: {} L={} H={} T={} B={}: {}", e.name, first.problem.model,
                                first.problem.num_layers, first.problem.hidden_size,
                                first.problem.time_steps, first.problem.batch, fmt::join(specs, " ")));
  std::vector<MethodRun> runs;
  try {
    const auto problem = make_problem(first.problem);
    RunOptions run_options;
    run_options.warmup = e.warmup;
    run_options.repeats = e.repeats;
    run_options.stable_within = e.until_stable;
    run_options.max_repeats = e.max_repeats;
    run_options.peak_flops_per_second = peak;
    run_options.gradient_error = e.gradient_error;
    runs = run_methods(problem, specs, run_options);
  } catch (const std::exception& error) {
    for (const auto* point : group) recorder.record(failed_record(*point, e, error), *point);
    return;
  }
  const auto* full = find_full(runs);
  for (size_t j = 0; j < group.size(); ++j) {
    json r = base_record(*group[j], e);
    r.update(to_json(runs[j]));
    // Interleaved with full BPTT in the same rounds: see paired_time_ratio.
    r.update(ratio_json(runs[j], full));
    recorder.record(r, *group[j]);
  }
}

// Step 6: meta.json as the run ends.
void finish_meta(json& meta, const SweepSummary& summary, const ResultsStore& store) {
  meta["finished"] = utc_now();
  meta["status"] = summary.interrupted ? "interrupted" : "complete";
  meta["points_measured"] = summary.measured;
  meta["points_failed"] = summary.failed;
  meta["load_average_end"] = measure::load_average();
  store.write_meta(meta);
}
}  // namespace

SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options) {
  ResultsStore store(options.out_dir);
  SweepSummary summary;
  const Plan plan = plan_run(config, options, store, summary);

  auto& tracker = measure::CpuMemoryTracker::instance();
  tracker.install();
  const json env = environment_json();
  warn_if_reference_blas(env, "vlrnn sweep");
  const auto peaks = measure_peak_rates(plan.points, options);
  json meta = start_meta(config, options, summary, plan, peaks, env);
  store.write_meta(meta);
  // The cap applies to the points only (not to the peak-GEMM matrices above).
  tracker.set_limit(config.memory_limit_bytes);

  Recorder recorder(config, store, summary, plan);
  for (const auto& group : group_points(plan.todo, config)) {
    if (options.stop_requested && options.stop_requested()) {
      summary.interrupted = true;
      break;
    }
    const auto& e = config.experiments[group.front()->experiment];
    const double peak = peaks.rate.at(gemm_key(group.front()->problem));
    if (e.kind == "max_batch") run_max_batch_point(*group.front(), e, peak, recorder);
    else run_grid_group(group, e, peak, recorder);
  }

  tracker.set_limit(0);
  store.write_csv();
  finish_meta(meta, summary, store);
  return summary;
}

}  // namespace vlrnn::experiments
