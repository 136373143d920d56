#include "lib/sweep_config.h"

#include "lib/json_fields.h"
#include "lib/method_checks.h"
#include "lib/method_specs.h"
#include "lib/user_models.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using namespace json_fields;

const std::vector<std::string> kExperimentKeys = {
    "name",   "description", "kind",    "figures", "methods", "models",        "T",
    "batch",  "block_length", "hidden",  "layers",  "input",   "head",          "classes",
    "dtype",  "device",      "repeats", "warmup",  "seed",    "gradient_error", "budget_mib",
    "batch_start", "batch_max", "batch_multiple", "model_file", "head_file", "until_stable",
    "max_repeats"};
// "block" did not say whether K was a length or a count: refused naming the new key.
const std::vector<RenamedKey> kRenamedSweepKeys = {
    {"block", "renamed to \"block_length\" (the block lengths K, in steps)"}};
const std::vector<std::string> kTopOnlyKeys = {"memory_limit_mib", "block_options",
                                               "experiments"};
// What scripts/plot.py draws (see its docstring).
const std::vector<std::string> kFigures = {"memory_vs_T", "time_vs_block",
                                           "memory_vs_utilization", "max_batch", "tbptt_error"};

// Where the methods of an experiment came from, resolved once every key is known.
struct PendingMethods {
  json value = "all";
  std::string path = "(default)";
};

void apply_key(ExperimentSpec& e, PendingMethods& methods, const std::string& key, const json& v,
               const std::string& path) {
  if (key == "name") e.name = read_string(v, path);
  else if (key == "description") read_string(v, path);
  else if (key == "kind") e.kind = read_string(v, path, {"grid", "max_batch"});
  else if (key == "figures") e.figures = read_string_list(v, path, kFigures);
  else if (key == "methods") methods = {v, path};
  else if (key == "models") {
    e.models = read_string_list(v, path);
    for (size_t i = 0; i < e.models.size(); ++i) {
      try {
        check_model_kind(e.models[i]);  // a registered kind or "bi:<kind>"
      } catch (const c10::Error& error) {
        fail(v.is_array() ? fmt::format("{}[{}]", path, i) : path, error.what_without_backtrace());
      }
    }
  }
  else if (key == "T") e.time_steps = read_int_list(v, path, 1, false);
  else if (key == "batch") e.batches = read_int_list(v, path, 1, false);
  else if (key == "block_length") e.blocks = read_int_list(v, path, 1, true);
  else if (key == "hidden") e.hidden_sizes = read_int_list(v, path, 1, false);
  else if (key == "layers") e.layers = read_int_list(v, path, 1, false);
  else if (key == "input") e.input_size = read_int(v, path, 1);
  else if (key == "head") e.head = read_string(v, path, head_kinds());
  else if (key == "classes") e.classes = read_int(v, path, 1);
  else if (key == "dtype") e.dtype = read_string(v, path, {"float32", "float64"});
  else if (key == "device") {
    e.device = read_string(v, path);
    try {
      parse_device(e.device);
    } catch (const c10::Error& error) {
      fail(path, error.what_without_backtrace());
    }
  }
  else if (key == "repeats") e.repeats = read_int(v, path, 1);
  else if (key == "warmup") e.warmup = read_int(v, path, 0);
  else if (key == "seed") e.seed = uint64_t(read_int(v, path, 0));
  else if (key == "gradient_error") e.gradient_error = read_bool(v, path);
  else if (key == "until_stable") {
    e.until_stable = read_positive_number(v, path);
    if (e.until_stable >= 1) fail(path, fmt::format("expected a fraction below 1 (e.g. 0.05), got {}", e.until_stable));
  }
  else if (key == "max_repeats") e.max_repeats = read_int(v, path, 1);
  else if (key == "budget_mib") e.budget_bytes = read_mib(v, path);
  else if (key == "batch_start") e.batch_start = read_int(v, path, 1);
  else if (key == "batch_max") e.batch_max = read_int(v, path, 1);
  else if (key == "batch_multiple") e.batch_multiple = read_int(v, path, 1);
  else if (key == "model_file") {
    // A TorchScript model registered as a kind (lib/user_models.h); it replaces "models",
    // and its own F and H replace "input" and "hidden", so the records show them.
    try {
      e.models = {add_model_file(read_string(v, path), /*argument=*/"")};
      const auto model = make_model({e.models[0]});
      e.input_size = model->input_size();
      e.hidden_sizes = {model->output_size()};
    } catch (const c10::Error& error) {
      fail(path, error.what_without_backtrace());
    }
  }
  else if (key == "head_file") {
    // A TorchScript head registered as a head kind (lib/user_models.h); it replaces "head"
    // and "classes" (the file fixes the targets it reads), so the records show its C.
    try {
      e.head = add_head_file(read_string(v, path), /*argument=*/"");
      const auto targets = make_head(e.head, 1, 2)->targets();
      if (targets) e.classes = targets->size;
    } catch (const c10::Error& error) {
      fail(path, error.what_without_backtrace());
    }
  }
}

std::vector<std::string> resolve_methods(const PendingMethods& pending, const ExperimentSpec& e,
                                         const std::map<std::string, std::string>& block_options,
                                         const std::string& experiment_path) {
  std::vector<std::string> specs;
  std::vector<std::string> paths;
  const json& v = pending.value;
  if (v.is_string() && (v == "all" || v == "exact" || v == "approximate")) {
    for (const auto& name : method_names()) {
      // Only the methods that take every model of the experiment: bivlrnn runs bidirectional
      // models alone, and the block methods refuse them.
      const bool takes_every_model =
          std::all_of(e.models.begin(), e.models.end(),
                      [&](const std::string& kind) { return method_takes_model(name, kind); });
      if (!takes_every_model) continue;
      const bool exact = make_method(name)->is_exact();
      if (v == "all" || (v == "exact") == exact) {
        specs.push_back(name);
        paths.push_back(pending.path);
      }
    }
  } else {
    specs = read_string_list(v, pending.path);
    for (size_t i = 0; i < specs.size(); ++i) {
      paths.push_back(v.is_array() ? fmt::format("{}[{}]", pending.path, i) : pending.path);
    }
    if (specs.empty()) fail(pending.path, "expected at least one method, got an empty list");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    auto& spec = specs[i];
    const auto option = block_options.find(spec);
    if (!has_options(spec) && option != block_options.end() && !e.blocks.empty()) {
      spec += ":" + option->second;
    }
    if (uses_block(spec) && e.blocks.empty()) {
      fail(experiment_path + ".block_length",
           fmt::format("method \"{}\" takes the block length ({{K}} or {{N}}); give a list of "
                       "block lengths",
                       spec));
    }
    try {
      check_method_specs({spec});
      for (const auto& kind : e.models) check_method_takes_model(spec, kind);
    } catch (const c10::Error& error) {
      fail(paths[i], error.what_without_backtrace());
    }
  }
  return specs;
}

// "block_options": method name -> option template with {K} or {N}; vlrnn's is built in.
std::map<std::string, std::string> parse_block_options(const json& config) {
  std::map<std::string, std::string> out = {{"vlrnn", "block_length={K}"}};
  if (!config.contains("block_options")) return out;
  const auto& options = config["block_options"];
  if (!options.is_object()) {
    fail("$.block_options", fmt::format("expected an object mapping method names to option "
                                        "templates, got {}", type_of(options)));
  }
  for (const auto& item : options.items()) {
    const std::string path = "$.block_options." + item.key();
    const auto value = read_string(item.value(), path);
    if (!uses_block(value)) {
      fail(path, fmt::format("expected an option template with {{K}} or {{N}} (e.g. "
                             "\"block_length={{K}}\"), got \"{}\"", value));
    }
    // A method that is not (yet) in the registry may have a template: it applies once the
    // method exists, and nothing refers to it until then.
    out[item.key()] = value;
  }
  return out;
}

// "model_file" brings its own model, F and H: the same object giving "models", "input" or
// "hidden" too would be overridden by one or the other in key order, so it is an error.
void check_model_file_alone(const json& object, const std::string& path) {
  if (!object.contains("model_file")) return;
  for (const char* key : {"models", "input", "hidden"}) {
    if (object.contains(key)) {
      fail(path + "." + key, fmt::format("\"model_file\" gives the model and its input and hidden "
                                         "sizes: expected no \"{}\" beside it", key));
    }
  }
}

// "head_file" brings its own head and targets: "head" or "classes" beside it would be
// overridden by one or the other in key order.
void check_head_file_alone(const json& object, const std::string& path) {
  if (!object.contains("head_file")) return;
  for (const char* key : {"head", "classes"}) {
    if (object.contains(key)) {
      fail(path + "." + key, fmt::format("\"head_file\" gives the head and the targets it reads: "
                                         "expected no \"{}\" beside it", key));
    }
  }
}

// The experiments of the config with their JSON paths: the "experiments" list, or the top
// level as the one experiment.
std::vector<std::pair<json, std::string>> list_experiments(const json& config) {
  std::vector<std::pair<json, std::string>> out;
  if (!config.contains("experiments")) {
    out.emplace_back(json::object(), "$");
    return out;
  }
  const auto& list = config["experiments"];
  if (!list.is_array() || list.empty()) {
    fail("$.experiments", fmt::format("expected a non-empty list of experiments, got {}", type_of(list)));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("$.experiments[{}]", i);
    if (!list[i].is_object()) fail(path, fmt::format("expected an object, got {}", type_of(list[i])));
    check_keys(list[i], path, kExperimentKeys, kRenamedSweepKeys);
    check_model_file_alone(list[i], path);
    check_head_file_alone(list[i], path);
    out.emplace_back(list[i], path);
  }
  return out;
}

// Checks across keys of one experiment, once all of them are applied.
void check_experiment(const ExperimentSpec& e, const json& object, const std::string& path) {
  if (e.head == "ce" && e.classes < 2) {
    fail(path + ".classes", fmt::format("expected >= 2 classes for a ce head, got {}", e.classes));
  }
  if (e.head != "ce" && e.head != "mse") {
    // A head file reads a fixed Z: every hidden size must give it (a model file's H, too).
    for (const auto hidden : e.hidden_sizes) {
      const int64_t z = make_head(e.head, hidden, e.classes)->input_size();
      if (hidden != z) {
        fail(path + (object.contains("model_file") ? ".model_file" : ".hidden"),
             fmt::format("the head \"{}\" reads Z = {} features per step (its input_size); "
                         "expected the model's H = {}, got H = {}", e.head, z, z, hidden));
      }
    }
  }
  if (e.until_stable > 0 && e.max_repeats < e.repeats) {
    fail(path + ".max_repeats", fmt::format("expected >= repeats ({}), got {}", e.repeats, e.max_repeats));
  }
  if (e.kind == "max_batch") {
    if (e.budget_bytes <= 0) fail(path + ".budget_mib", "kind max_batch needs a memory budget (MiB)");
    if (e.batch_max < e.batch_start) {
      fail(path + ".batch_max", fmt::format("expected >= batch_start ({}), got {}", e.batch_start, e.batch_max));
    }
  } else if (object.contains("budget_mib")) {
    fail(path + ".budget_mib", "a memory budget needs \"kind\": \"max_batch\"");
  }
}

}  // namespace

SweepConfig parse_sweep_config(const json& config, const std::string& name) {
  if (!config.is_object()) fail("$", fmt::format("expected an object, got {}", type_of(config)));
  auto top_keys = kExperimentKeys;
  top_keys.insert(top_keys.end(), kTopOnlyKeys.begin(), kTopOnlyKeys.end());
  check_keys(config, "$", top_keys, kRenamedSweepKeys);

  check_model_file_alone(config, "$");
  check_head_file_alone(config, "$");
  SweepConfig out;
  out.raw = config;
  out.name = config.contains("name") ? read_string(config["name"], "$.name") : name;
  if (out.name.empty() || out.name.find('/') != std::string::npos) {
    fail("$.name", fmt::format("expected a non-empty name without '/', got \"{}\"", out.name));
  }
  if (config.contains("memory_limit_mib")) {
    out.memory_limit_bytes = read_mib(config["memory_limit_mib"], "$.memory_limit_mib");
  }
  out.block_options = parse_block_options(config);

  // Defaults: the top level's experiment keys (its "name" names the config, not a grid).
  ExperimentSpec defaults;
  PendingMethods default_methods;
  for (const auto& item : config.items()) {
    if (item.key() == "name") continue;
    if (std::find(kExperimentKeys.begin(), kExperimentKeys.end(), item.key()) == kExperimentKeys.end()) continue;
    apply_key(defaults, default_methods, item.key(), item.value(), "$." + item.key());
  }

  const auto experiments = list_experiments(config);
  std::set<std::string> names;
  for (size_t i = 0; i < experiments.size(); ++i) {
    const auto& [object, path] = experiments[i];
    ExperimentSpec e = defaults;
    PendingMethods methods = default_methods;
    e.name = fmt::format("grid{}", i);
    if (experiments.size() == 1 && path == "$") e.name = out.name;
    for (const auto& item : object.items()) {
      apply_key(e, methods, item.key(), item.value(), path + "." + item.key());
    }
    if (!names.insert(e.name).second) {
      fail(path + ".name", fmt::format("duplicate experiment name \"{}\"", e.name));
    }
    check_experiment(e, object, path);
    e.methods = resolve_methods(methods, e, out.block_options, path);
    out.experiments.push_back(std::move(e));
  }
  return out;
}

SweepConfig load_sweep_config(const std::string& path, const std::string& device) {
  auto config = read_json_file(path);
  if (!device.empty() && config.is_object()) {
    config["device"] = device;
    if (config.contains("experiments") && config["experiments"].is_array()) {
      for (auto& experiment : config["experiments"]) {
        if (experiment.is_object()) experiment.erase("device");
      }
    }
  }
  auto out = parse_sweep_config(config, std::filesystem::path(path).stem().string());
  out.path = path;
  return out;
}

std::string config_hash(const SweepConfig& config) {
  const std::string text = config.name + "\n" + config.raw.dump();
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64: stable across machines and builds
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

std::vector<SweepPoint> expand_points(const SweepConfig& config) {
  std::vector<SweepPoint> points;
  std::set<std::string> keys;
  for (size_t x = 0; x < config.experiments.size(); ++x) {
    const auto& e = config.experiments[x];
    const bool max_batch = e.kind == "max_batch";
    const auto batches = max_batch ? std::vector<int64_t>{e.batch_start} : e.batches;
    for (const auto& model : e.models)
      for (int64_t layers : e.layers)
        for (int64_t hidden : e.hidden_sizes)
          for (int64_t steps : e.time_steps)
            for (int64_t batch : batches) {
              ProblemSpec problem;
              problem.model = model;
              problem.num_layers = layers;
              problem.hidden_size = hidden;
              problem.input_size = e.input_size;
              problem.head = e.head;
              problem.head_outputs = e.classes;
              problem.time_steps = steps;
              problem.batch = batch;
              problem.dtype = parse_dtype(e.dtype);
              problem.device = parse_device(e.device);
              problem.seed = e.seed;
              // K-independent methods run at the first K only (their K is null).
              const auto blocks = e.blocks.empty() ? std::vector<int64_t>{0} : e.blocks;
              for (size_t k = 0; k < blocks.size(); ++k) {
                for (const auto& method : e.methods) {
                  const bool takes_block = uses_block(method);
                  if (!takes_block && k > 0) continue;
                  SweepPoint point;
                  point.experiment = x;
                  point.problem = problem;
                  point.block = takes_block ? blocks[k] : 0;
                  point.method = takes_block ? substitute_block(method, blocks[k], steps) : method;
                  point.key = fmt::format("{}|{}|L={}|F={}|H={}|C={}|{}|T={}|B={}|{}|{}|{}|seed={}", e.name,
                                          model, layers, e.input_size, hidden, e.classes, e.head,
                                          steps, max_batch ? std::string("max") : std::to_string(batch),
                                          point.method, e.dtype, e.device, e.seed);
                  if (keys.insert(point.key).second) points.push_back(std::move(point));
                }
              }
            }
  }
  return points;
}

}  // namespace vlrnn::experiments
