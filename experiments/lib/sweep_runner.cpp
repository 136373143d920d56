#include "lib/sweep_runner.h"

#include "lib/max_batch.h"
#include "lib/method_runner.h"
#include "lib/method_specs.h"
#include "lib/results_store.h"
#include "lib/units.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/measure/peak_gemm.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buffer;
}

std::string gemm_key(const ProblemSpec& p) { return p.device.str() + "/" + dtype_name(p.dtype); }

// Relative cost of a point, for the ETA: FLOPs of the steps it will run.
double point_cost(const SweepPoint& point, const ExperimentSpec& e) {
  const auto& p = point.problem;
  // An unknown model kind is costed as an LSTM: this is only the ETA.
  const std::string kind = measure::has_flop_model(p.model) ? p.model : "lstm";
  const double per_step = measure::flops_per_step({kind, p.input_size, p.hidden_size, p.num_layers},
                                                  p.head, p.head_outputs).forward() * 3.0;
  const double runs = double(e.warmup + e.repeats) + (e.gradient_error ? 2.0 : 0.0);
  if (e.kind == "max_batch") {
    // Unknown until searched: assume a few hundred sequences and ~8 probes.
    return per_step * double(p.time_steps) * 256.0 * (runs + 8.0);
  }
  return per_step * double(p.time_steps) * double(p.batch) * runs;
}

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

}  // namespace

json environment_json() {
  const auto blas = measure::detect_blas();
  return {{"git_sha", measure::git_sha(".")},
          {"git_dirty", measure::git_dirty(".")},
          {"libtorch_version", measure::libtorch_version()},
          {"blas", {{"vendor", blas.vendor},
                    {"loaded", blas.loaded},
                    {"alternative", blas.alternative},
                    {"reference", blas.reference}}},
          {"nproc", measure::cpu_count()},
          {"cpu_model", measure::cpu_model()},
          {"torch_threads", at::get_num_threads()},
          {"methods_in_registry", method_names()},
          {"load_average", measure::load_average()}};
}

SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options) {
  const auto points = expand_points(config);
  ResultsStore store(options.out_dir);
  SweepSummary summary;
  summary.total = int64_t(points.size());

  json previous_meta;
  std::set<std::string> done_keys;
  if (options.resume) {
    done_keys = store.recorded_keys();
    previous_meta = store.read_meta();
  } else if (store.has_records()) {
    store.move_to_previous();
    std::cerr << "vlrnn sweep: " << options.out_dir << " held results; moved them to "
              << options.out_dir << "/previous/ (use --resume to continue a sweep instead)\n";
  }
  std::vector<const SweepPoint*> todo;
  for (const auto& point : points) {
    if (done_keys.count(point.key)) ++summary.skipped;
    else todo.push_back(&point);
  }
  if (summary.skipped > 0) {
    std::cerr << fmt::format("vlrnn sweep: resuming: {} of {} points already recorded\n",
                             summary.skipped, summary.total);
  }

  auto& tracker = measure::CpuMemoryTracker::instance();
  tracker.install();

  json env = environment_json();
  if (env["blas"]["reference"].get<bool>()) {
    std::cerr << "vlrnn sweep: WARNING: LibTorch runs on the REFERENCE BLAS ("
              << env["blas"]["loaded"].get<std::string>()
              << "), ~30x slower than OpenBLAS: times and utilization measure the wrong thing. "
                 "Install libopenblas0-pthread (scripts/install_deps.sh does).\n";
  }
  // The peak GEMM rate of every device and dtype the sweep uses.
  json peak_gemm = json::object();
  std::map<std::string, double> peak_rate;
  for (const auto& point : points) {
    const auto key = gemm_key(point.problem);
    if (peak_rate.count(key)) continue;
    std::cerr << "vlrnn sweep: measuring the peak GEMM rate on " << key << "...\n";
    const auto peak = measure::measure_peak_gemm(point.problem.device, point.problem.dtype,
                                                 options.peak_gemm_size, options.peak_gemm_repeats);
    peak_rate[key] = peak.flops_per_second;
    peak_gemm[key] = {{"n", peak.n}, {"flops_per_s", peak.flops_per_second},
                      {"threads", peak.threads}, {"time_s", to_json(peak.time)}};
  }
  json devices = json::object();
  for (const auto& point : points) devices[point.problem.device.str()] = measure::describe_device(point.problem.device);

  json meta = {{"config_name", config.name},
               {"config_path", config.path},
               {"config", config.raw},
               {"command_line", options.command_line},
               {"working_directory", std::filesystem::current_path().string()},
               {"started", utc_now()},
               {"finished", nullptr},
               {"status", "running"},
               {"points_total", summary.total},
               {"points_already_recorded", summary.skipped},
               {"memory_limit_bytes", config.memory_limit_bytes},
               {"devices", devices},
               {"peak_gemm", peak_gemm}};
  meta.update(env);
  json experiments = json::array();
  for (const auto& e : config.experiments) {
    experiments.push_back({{"name", e.name}, {"kind", e.kind}, {"figures", e.figures},
                           {"methods", e.methods}});
  }
  meta["experiments"] = experiments;
  if (options.resume && !previous_meta.empty()) {
    json runs = previous_meta.value("previous_runs", json::array());
    previous_meta.erase("previous_runs");
    previous_meta.erase("config");
    runs.push_back(previous_meta);
    meta["previous_runs"] = runs;
  }
  store.write_meta(meta);
  // The cap applies to the points only (not to the peak-GEMM matrices above).
  tracker.set_limit(config.memory_limit_bytes);

  double total_cost = 0.0, done_cost = 0.0;
  for (const auto* point : todo) total_cost += point_cost(*point, config.experiments[point->experiment]);
  const auto started = std::chrono::steady_clock::now();
  int64_t index = summary.skipped;
  auto progress_line = [&](const std::string& label) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double eta = done_cost > 0 ? elapsed * (total_cost - done_cost) / done_cost : -1.0;
    std::cerr << fmt::format("[sweep {}/{} | {} elapsed | ETA {}] {}\n", index, summary.total,
                             format_duration(elapsed), eta >= 0 ? format_duration(eta) : "?", label);
  };
  auto record = [&](const json& r, const SweepPoint& point) {
    store.append(r);
    store.write_csv();
    ++summary.measured;
    ++index;
    done_cost += point_cost(point, config.experiments[point.experiment]);
    const std::string status = r.value("status", "ok");
    if (status != "ok") ++summary.failed;
    std::string result = status;
    if (status == "ok" && r.contains("time_s")) {
      result = fmt::format("{} per step, step peak {}", format_seconds(r["time_s"]["median"].get<double>()),
                           format_bytes(r["memory"]["step_peak_bytes"].get<double>()));
    } else if (status != "ok") {
      result += ": " + r.value("error", std::string());
    }
    progress_line(point_label(point, config.experiments[point.experiment]) + " -> " + result);
  };

  for (size_t i = 0; i < todo.size();) {
    if (options.stop_requested && options.stop_requested()) {
      summary.interrupted = true;
      break;
    }
    const auto& first = *todo[i];
    const auto& e = config.experiments[first.experiment];
    // A group: adjacent points of one experiment on one problem, run interleaved.
    size_t end = i + 1;
    if (e.kind == "grid") {
      while (end < todo.size() && todo[end]->experiment == first.experiment &&
             todo[end]->problem == first.problem) {
        ++end;
      }
    }
    const double peak = peak_rate[gemm_key(first.problem)];
    if (e.kind == "max_batch") {
      progress_line(point_label(first, e) + ": searching the batch under " +
                    format_bytes(double(e.budget_bytes)));
      try {
        const auto outcome = find_max_batch(first.problem, first.method, e, peak, [](const std::string& line) {
          std::cerr << line << "\n";
        });
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
          if (outcome.run->status == "ok") {
            r["total_bytes"] = outcome.run->workload_bytes + outcome.run->memory.step_peak_bytes;
          }
        } else {
          r["method"] = first.method;
          r["status"] = "over_budget";
          r["error"] = fmt::format("batch {} already exceeds the budget", e.batch_start);
        }
        record(r, first);
      } catch (const std::exception& error) {
        record(failed_record(first, e, error), first);
      }
      i = end;
      continue;
    }

    std::vector<std::string> specs;
    for (size_t j = i; j < end; ++j) specs.push_back(todo[j]->method);
    progress_line(fmt::format("{}: {} L={} H={} T={} B={}: {}", e.name, first.problem.model,
                              first.problem.num_layers, first.problem.hidden_size,
                              first.problem.time_steps, first.problem.batch, fmt::join(specs, " ")));
    std::vector<MethodRun> runs;
    try {
      const auto problem = make_problem(first.problem);
      RunOptions run_options;
      run_options.warmup = e.warmup;
      run_options.repeats = e.repeats;
      run_options.peak_flops_per_second = peak;
      run_options.gradient_error = e.gradient_error;
      runs = run_methods(problem, specs, run_options);
    } catch (const std::exception& error) {
      for (size_t j = i; j < end; ++j) record(failed_record(*todo[j], e, error), *todo[j]);
      i = end;
      continue;
    }
    const MethodRun* full = nullptr;
    for (const auto& run : runs) {
      if (run.name == "full" && run.status == "ok") full = &run;
    }
    for (size_t j = i; j < end; ++j) {
      json r = base_record(*todo[j], e);
      r.update(to_json(runs[j - i]));
      if (full && runs[j - i].status == "ok") {
        // Interleaved with full BPTT in the same rounds: see paired_time_ratio.
        r["paired_time_ratio_to_full"] = paired_time_ratio(runs[j - i], *full);
      }
      record(r, *todo[j]);
    }
    i = end;
  }

  tracker.set_limit(0);
  store.write_csv();
  meta["finished"] = utc_now();
  meta["status"] = summary.interrupted ? "interrupted" : "complete";
  meta["points_measured"] = summary.measured;
  meta["points_failed"] = summary.failed;
  meta["load_average_end"] = measure::load_average();
  store.write_meta(meta);
  return summary;
}

}  // namespace vlrnn::experiments
