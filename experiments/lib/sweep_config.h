#pragma once
// A sweep's config file (JSON) and the grid of points it expands to.
//
// {
//   "name": "quick",                  // optional; default: the file name without .json
//   "description": "free text",
//   "memory_limit_mib": 8192,         // optional: a hard cap on CPU tensor bytes (tracking
//                                     // allocator), so a point that would exhaust the
//                                     // machine is recorded as "oom" instead
//   "block_options": {"vlrnn": "block_length={K}", "checkpoint": "segments={N}"},
//   ...any experiment key below, as the default of every experiment...,
//   "experiments": [ { "name": "memory_vs_T", ...experiment keys... }, ... ]
// }                                   // no "experiments": the top level is the one grid
//
// Experiment keys (a list key also takes a single value):
//   name           string; default "grid<i>"
//   kind           "grid" (default) or "max_batch"
//   figures        list of figure names this data is meant for (scripts/plot.py reads it)
//   methods        list of method specs, or "all" / "exact" / "approximate" (default "all":
//                  every method in the registry, so new methods join without an edit)
//   models         list of model kinds (rnn, gru, lstm, gru_lstm, ... or a plugin's);
//                  default ["lstm"]
//   model_file     a TorchScript model file (vlrnn/core/script_model.h), relative to the
//                  working directory: the experiment's one model, instead of "models";
//                  its own F and H replace "input" and "hidden" (giving any of those three
//                  in the same object is an error)
//   head_file      a TorchScript head file (vlrnn/core/script_head.h), relative to the
//                  working directory: the experiment's head, instead of "head" and "classes"
//                  (giving either in the same object is an error); its input_size must be
//                  every hidden size (or the model file's H)
//   T, batch, block_length, hidden, layers
//                  lists of positive integers; block_length may be empty (no K-dependent methods)
//   input, classes F and C; head "ce", "mse" or another registered head kind
//   dtype          "float32" | "float64";  device "cpu" | "cuda" | "cuda:N"
//   repeats, warmup, seed, gradient_error (bool: compare each point's gradients with full)
//   until_stable   a fraction (e.g. 0.05): after `repeats`, rounds until every time ratio to
//                  full has its 95 % interval within ±until_stable, at most max_repeats
//   budget_mib, batch_start, batch_max, batch_multiple      (kind "max_batch" only)
//
// NOTE [ Which methods get K ]: a method spec with {K} or {N} (vlrnn/.../method_specs.h)
// runs once per block length; a bare method name whose block_options entry gives a
// template ("vlrnn" -> "block_length={K}") becomes that template; any other method runs once per
// point, its K recorded as null. The built-in default is {"vlrnn": "block_length={K}"}.

#include "lib/problem.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace vlrnn::experiments {

struct ExperimentSpec {
  std::string name;
  std::string kind = "grid";  // "grid" | "max_batch"
  std::vector<std::string> figures;
  std::vector<std::string> methods;  // specs; templates ({K}, {N}) allowed
  std::vector<std::string> models = {"lstm"};
  std::vector<int64_t> time_steps = {1024};
  std::vector<int64_t> batches = {16};
  std::vector<int64_t> blocks;  // K values; empty = none
  std::vector<int64_t> hidden_sizes = {128};
  std::vector<int64_t> layers = {1};
  int64_t input_size = 32;
  std::string head = "ce";
  int64_t classes = 16;
  std::string dtype = "float32";
  std::string device = "cpu";
  int64_t repeats = 3;
  int64_t warmup = 1;
  // Until stable (RunOptions::stable_within): more rounds after `repeats` until every time
  // ratio to full is known within ±until_stable, at most max_repeats rounds. 0: off.
  double until_stable = 0.0;
  int64_t max_repeats = 50;
  uint64_t seed = 1;
  bool gradient_error = false;
  // kind "max_batch": the largest batch whose workload + iteration peak fits in budget_bytes,
  // searched by doubling from batch_start then bisection, in multiples of batch_multiple.
  int64_t budget_bytes = 0;
  int64_t batch_start = 1;
  int64_t batch_max = 65536;
  int64_t batch_multiple = 1;
};

struct SweepConfig {
  std::string name;
  std::string path;  // the file it came from ("" when parsed from memory)
  nlohmann::json raw;
  std::map<std::string, std::string> block_options;
  int64_t memory_limit_bytes = 0;  // 0 = none
  std::vector<ExperimentSpec> experiments;
};

// Throws an error naming the JSON path of the offending key ($.experiments[1].T[0]) and
// what was wrong: unknown keys, wrong types, bad values, unknown methods.
SweepConfig parse_sweep_config(const nlohmann::json& config, const std::string& name);
// `device`, when not empty (`vlrnn sweep --device`), replaces every experiment's device, as
// if the file said it at the top level and nowhere else; the config recorded says so too.
SweepConfig load_sweep_config(const std::string& path, const std::string& device = "");

// 16 hex digits (FNV-1a 64 of the name and the JSON, keys sorted, comments gone): equal for
// the same grid however the file is formatted; what `merge` checks shards against.
std::string config_hash(const SweepConfig& config);

// One point of the grid: one method on one problem (for max_batch, the batch is searched).
struct SweepPoint {
  std::string key;  // unique in the sweep; what --resume matches
  size_t experiment = 0;
  ProblemSpec problem;
  std::string method;  // the spec run (templates substituted)
  int64_t block = 0;   // K; 0 = the method takes none
};

// Every point, experiments in order; within one: models, layers, hidden, T, B, K, methods
// (methods innermost, so points sharing a problem are adjacent and run interleaved).
std::vector<SweepPoint> expand_points(const SweepConfig& config);

}  // namespace vlrnn::experiments
