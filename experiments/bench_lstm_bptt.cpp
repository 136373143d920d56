// Whole iterations of several (method, model) pairs on ONE workload, interleaved round
// by round in one process: `vlrnn compare` runs one model per invocation, and on a shared
// machine only ratios measured side by side mean anything. Made for lstm_block against
// LibTorch's LSTM (the built-in "lstm" kind), which share weights by name: every model is
// built from the same seed, then the first model's parameters are copied into the others by
// name, so all pairs compute the same function of the same data.
//
//   build/bench_lstm_bptt --hidden 256 --batch 32 --T 1024 \
//       --runs full@lstm,full@lstm_block,vlrnn:block=128@lstm_block --repeats 7 [--json F]
//
// Per pair: median time per iteration and its spread (min-max, and the interquartile
// range); the paired time ratio to the first pair (median over rounds of the ratio within a
// round, with its min-max over rounds); the iteration's peak memory (exact tensor bytes above
// parameters + data, the tracking allocator of vlrnn/measure) and its ratio to the first
// pair's; useful GFLOP/s and utilization of the peak GEMM rate measured at start-up; and the
// gradients' largest relative difference from the first pair's (loss, per-step losses,
// every parameter gradient, final state).
// Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers.

#include "lib/method_runner.h"
#include "lib/problem.h"
#include "lib/source_stamp.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/peak_gemm.h"
#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/measure/timer.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/verify/compare.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <type_traits>
#include <map>
#include <optional>

namespace {

using namespace vlrnn;

struct Args {
  experiments::ProblemSpec problem;
  std::string runs = "full@lstm,full@lstm_block";
  int64_t repeats = 5, warmup = 1, threads = 0;
  std::string dtype = "float32", json_path;
};

void usage() {
  std::cerr << "usage: bench_lstm_bptt [--input F] [--hidden H] [--layers L] [--batch B] [--T T]\n"
               "       [--min-length FRACTION] [--dtype float32|float64] [--runs METHOD@MODEL,...]\n"
               "       [--repeats N] [--warmup N] [--threads N] [--seed S] [--json FILE]\n";
}

// The whole of `value` as a number, or an error naming `key`.
template <typename Number>
Number number(const std::string& key, const std::string& value) {
  size_t used = 0;
  Number out{};
  try {
    out = std::is_integral_v<Number> ? Number(std::stoll(value, &used)) : Number(std::stod(value, &used));
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK(used == value.size() && !value.empty(), key, ": expected a number, got \"", value, "\"");
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--help" || key == "-h") {
      usage();
      std::exit(0);
    }
    TORCH_CHECK(i + 1 < argc, key, ": expected a value after it, got none");
    const std::string value = argv[++i];
    auto& p = a.problem;
    if (key == "--input") p.input_size = number<int64_t>(key, value);
    else if (key == "--hidden") p.hidden_size = number<int64_t>(key, value);
    else if (key == "--layers") p.num_layers = number<int64_t>(key, value);
    else if (key == "--batch") p.batch = number<int64_t>(key, value);
    else if (key == "--T") p.time_steps = number<int64_t>(key, value);
    else if (key == "--min-length") p.min_length_fraction = number<double>(key, value);
    else if (key == "--seed") p.seed = uint64_t(number<int64_t>(key, value));
    else if (key == "--dtype") a.dtype = value;
    else if (key == "--runs") a.runs = value;
    else if (key == "--repeats") a.repeats = number<int64_t>(key, value);
    else if (key == "--warmup") a.warmup = number<int64_t>(key, value);
    else if (key == "--threads") a.threads = number<int64_t>(key, value);
    else if (key == "--json") a.json_path = value;
    else TORCH_CHECK(false, "unknown option \"", key, "\"");
  }
  TORCH_CHECK(a.repeats >= 1, "--repeats: expected >= 1, got ", a.repeats);
  return a;
}

struct Pair {
  std::string method, model;  // "vlrnn:block=128", "lstm_block"
  std::vector<double> seconds;
  int64_t iteration_peak_bytes = 0;
  StepCounters counters;
  verify::Difference error;
  std::string label() const { return method + " @ " + model; }
};

std::vector<Pair> parse_pairs(const std::string& list) {
  std::vector<Pair> pairs;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    const size_t at = item.find('@');
    TORCH_CHECK(at != std::string::npos, "--runs: expected METHOD@MODEL items, got \"", item, "\"");
    Pair p;
    p.method = item.substr(0, at);
    p.model = item.substr(at + 1);
    pairs.push_back(p);
    start = end + 1;
  }
  return pairs;
}

// Copies the parameters of `from` into `to` (same names), so both kinds run the same weights.
void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to, const std::string& what) {
  const auto src = from.named_parameters();
  auto dst = to.named_parameters();
  TORCH_CHECK(src.size() == dst.size(), what, ": expected the same parameters, got ", src.size(),
              " and ", dst.size());
  torch::NoGradGuard no_grad;
  for (const auto& item : src) {
    TORCH_CHECK(dst.contains(item.key()), what, ": lacks parameter ", item.key());
    dst[item.key()].copy_(item.value());
  }
}

// One problem per model kind; parameters and data are the first one's.
std::map<std::string, experiments::Problem> make_problems(const std::vector<Pair>& pairs,
                                                          experiments::ProblemSpec spec) {
  std::map<std::string, experiments::Problem> problems;
  const experiments::Problem* first = nullptr;
  for (const auto& p : pairs) {
    if (problems.count(p.model)) continue;
    spec.model = p.model;
    auto problem = experiments::make_problem(spec);
    if (first) {
      problem.batch = first->batch;
      copy_parameters(*first->model, *problem.model,
                      fmt::format("models {} and {}", first->spec.model, p.model));
      copy_parameters(*first->head, *problem.head, "heads");
    }
    const auto& stored = problems.emplace(p.model, std::move(problem)).first->second;
    if (!first) first = &stored;
  }
  return problems;
}

// Every pair once per round, rounds after the warm-up timed.
void run_rounds(std::vector<Pair>& pairs, const std::map<std::string, experiments::Problem>& problems,
                const Args& args) {
  std::vector<std::unique_ptr<GradientMethod>> methods;
  for (const auto& p : pairs) methods.push_back(make_method_from_spec(p.method));
  for (int64_t r = 0; r < args.warmup + args.repeats; ++r) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto& problem = problems.at(pairs[i].model);
      const auto measured = measure::measure_iteration(*methods[i], problem.workload(), torch::kCPU);
      std::cerr << fmt::format("  {} {} {}: {:.3f} s\n", pairs[i].label(),
                               r < args.warmup ? "warm-up" : "repeat", r + 1, measured.seconds);
      if (r < args.warmup) continue;
      pairs[i].seconds.push_back(measured.seconds);
      pairs[i].iteration_peak_bytes = std::max(pairs[i].iteration_peak_bytes, measured.memory.iteration_peak_bytes);
      pairs[i].counters = measured.counters;
    }
  }
}

// Gradients of every pair against the first pair's.
void compare_gradients(std::vector<Pair>& pairs,
                       const std::map<std::string, experiments::Problem>& problems, uint64_t seed) {
  std::optional<verify::GradientSnapshot> reference;
  for (auto& pair : pairs) {
    const auto& problem = problems.at(pair.model);
    auto method = make_method_from_spec(pair.method);
    torch::manual_seed(seed + 1);
    auto snapshot = verify::run_and_snapshot(*method, problem.workload());
    if (!reference) reference = std::move(snapshot);
    else pair.error = verify::compare(snapshot, *reference);
    measure::clear_gradients(problem.workload());
  }
}

// One row of the table and of the JSON: the pair against the first pair.
nlohmann::json report_pair(const Pair& p, const Pair& base, const experiments::Problem& problem,
                           double peak_flops) {
  const auto& s = problem.spec;
  const auto t = measure::summarize(p.seconds);
  std::vector<double> ratios;
  for (size_t r = 0; r < p.seconds.size(); ++r) ratios.push_back(p.seconds[r] / base.seconds[r]);
  const auto ratio = measure::summarize(ratios);
  const auto flops = measure::iteration_flops(problem.flops, s.time_steps, s.batch,
                                         problem.valid_steps(), p.counters);
  const double rate = flops.useful() / t.median;
  const double mem_ratio = double(base.iteration_peak_bytes) / double(std::max<int64_t>(1, p.iteration_peak_bytes));
  std::cout << fmt::format(
      "{:<34} {:>8.3f}s {:>8.3f}-{:>8.3f}s {:>6.3f} ({:.3f}-{:.3f}) {:>9.1f}MB {:>10.2f} "
      "{:>9.1f} {:>5.1f}% {:>10.2e}\n",
      p.label(), t.median, t.min, t.max, ratio.median, ratio.min, ratio.max,
      double(p.iteration_peak_bytes) / 1e6, mem_ratio, rate * 1e-9, 100.0 * rate / peak_flops,
      p.error.max_rel);
  return {{"method", p.method},
          {"model", p.model},
          {"time_s", experiments::to_json(t)},
          {"samples_s", p.seconds},
          {"paired_ratio_to_first", experiments::to_json(ratio)},
          {"iteration_peak_bytes", p.iteration_peak_bytes},
          {"memory_ratio_first_to_this", mem_ratio},
          {"useful_flops_per_s", rate},
          {"utilization", rate / peak_flops},
          {"recompute_overhead", flops.overhead()},
          {"max_rel_diff_to_first", p.error.max_rel},
          {"worst_tensor", p.error.worst}};
}

int run(const Args& args) {
  if (args.threads > 0) at::set_num_threads(int(args.threads));
  measure::CpuMemoryTracker::instance().install();
  auto pairs = parse_pairs(args.runs);
  auto spec = args.problem;
  spec.dtype = experiments::parse_dtype(args.dtype);
  const auto peak = measure::measure_peak_gemm(torch::kCPU, spec.dtype, 1024, 10, 2);
  const auto problems = make_problems(pairs, spec);
  const std::string load_start = measure::load_average();
  run_rounds(pairs, problems, args);
  compare_gradients(pairs, problems, spec.seed);

  const auto blas = measure::detect_blas();
  const auto& s = problems.at(pairs.front().model).spec;
  std::cout << fmt::format("bench_lstm_bptt: {} | BLAS {} | torch threads {} | load {} -> {}\n",
                           s.describe(), blas.vendor, at::get_num_threads(), load_start,
                           measure::load_average());
  std::cout << fmt::format("peak GEMM (1024^2 {}): {:.1f} GFLOP/s | {} warm-up + {} rounds, "
                           "pairs interleaved in each round\n\n",
                           args.dtype, peak.flops_per_second * 1e-9, args.warmup, args.repeats);
  std::cout << fmt::format("{:<34} {:>9} {:>19} {:>21} {:>11} {:>10} {:>9} {:>6} {:>10}\n", "run",
                           "median", "min-max", "paired ratio (range)", "iter. peak",
                           "mem ratio", "GFLOP/s", "util", "max rel");
  nlohmann::json out = {{"problem", experiments::to_json(s)},
                        {"peak_gemm_flops_per_s", peak.flops_per_second},
                        {"blas", blas.vendor},
                        {"blas_library", blas.loaded},
                        {"torch_threads", at::get_num_threads()},
                        {"git_sha", experiments::built_from().git_sha},
                        {"git_dirty", experiments::git_dirty_json(experiments::built_from().tree)},
                        {"load_average_start", load_start},
                        {"load_average_end", measure::load_average()},
                        {"warmup", args.warmup},
                        {"repeats", args.repeats},
                        {"runs", nlohmann::json::array()}};
  for (const auto& p : pairs) {
    out["runs"].push_back(report_pair(p, pairs.front(), problems.at(p.model), peak.flops_per_second));
  }
  if (!args.json_path.empty()) {
    std::ofstream file(args.json_path);
    TORCH_CHECK(file, "--json: cannot write \"", args.json_path, "\"");
    file << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const c10::Error& e) {  // the message alone, never a C++ backtrace
    std::cerr << "bench_lstm_bptt: " << e.what_without_backtrace() << "\n";
    usage();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_lstm_bptt: " << e.what() << "\n";
    usage();
    return 2;
  }
}
