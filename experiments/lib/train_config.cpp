#include "lib/train_config.h"

#include "lib/json_fields.h"
#include "lib/method_checks.h"
#include "lib/problem.h"
#include "lib/tasks.h"

#include "lib/user_models.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using namespace json_fields;

const std::vector<std::string> kKeys = {
    "name", "description", "task", "model", "methods", "seeds", "batch", "optimizer_steps",
    "time_limit_s", "optimizer", "lr_schedule", "schedule", "eval_every", "eval_batches", "eval_batch",
    "checkpoint_every", "memory_budget_mib", "batch_max", "dtype", "device", "head_file",
    "flush_denormals"};
// "steps" counted the optimizer's steps here and was the sequence length inside "task" (now
// "task.time_steps"): refused naming both new keys, so an older config says which it meant.
const std::vector<RenamedKey> kRenamedKeys = {
    {"steps", "renamed to \"optimizer_steps\" (the number of optimizer steps); the task's "
              "length is \"task.time_steps\""}};

// "model" at the top level, or a method entry's own ("methods[i].model"): `path` names it.
ModelConfig parse_model(const json& v, double& carry_bias, const std::string& path = "model") {
  if (!v.is_object()) fail(path, "expected an object with a \"kind\", got " + type_of(v));
  check_keys(v, path, {"kind", "model_file", "hidden", "layers", "dropout", "carry_bias"});
  ModelConfig model;
  if (v.contains("model_file")) {
    // A TorchScript model (lib/user_models.h): it fixes its own kind and sizes.
    for (const char* key : {"kind", "hidden", "layers", "dropout"}) {
      if (v.contains(key)) {
        fail(path + "." + key, fmt::format("\"model_file\" gives the model and its "
                                                      "sizes: expected no \"{}\" beside it", key));
      }
    }
    try {
      model.kind = add_model_file(read_string(v["model_file"], path + ".model_file"), "");
    } catch (const c10::Error& error) {
      fail(path + ".model_file", error.what_without_backtrace());
    }
  }
  if (v.contains("kind")) {
    model.kind = read_string(v["kind"], path + ".kind");
    try {
      check_model_kind(model.kind);  // a registered kind or "bi:<kind>"
    } catch (const c10::Error& error) {
      fail(path + ".kind", error.what_without_backtrace());
    }
  }
  if (v.contains("hidden")) model.hidden_size = read_int(v["hidden"], path + ".hidden", 1);
  if (v.contains("layers")) model.num_layers = read_int(v["layers"], path + ".layers", 1);
  if (v.contains("dropout")) model.dropout = read_number(v["dropout"], path + ".dropout", 0.0, 0.99);
  if (v.contains("carry_bias")) {
    carry_bias = read_number(v["carry_bias"], path + ".carry_bias", -20, 20);
    if (model.kind != "lstm" && model.kind != "lstm_block" && model.kind != "lstm_cells" &&
        model.kind != "gru" && model.kind.rfind("gru_v", 0) != 0) {
      fail(path + ".carry_bias", "only LSTM and GRU models (lstm, lstm_block, lstm_cells, gru, "
           "gru_v1..4) have a gate that keeps the state; the model is \"" + model.kind + "\"");
    }
  }
  return model;
}

OptimizerConfig parse_optimizer(const json& v) {
  if (!v.is_object()) fail("optimizer", "expected an object, got " + type_of(v));
  check_keys(v, "optimizer", {"kind", "lr", "momentum", "weight_decay", "clip", "batch_scaling",
                              "reference_batch"});
  OptimizerConfig out;
  if (v.contains("kind")) out.kind = read_string(v["kind"], "optimizer.kind", {"adam", "sgd"});
  if (v.contains("lr")) out.lr = read_positive_number(v["lr"], "optimizer.lr");
  if (v.contains("momentum")) out.momentum = read_number(v["momentum"], "optimizer.momentum", 0, 0.999);
  if (v.contains("weight_decay")) {
    out.weight_decay = read_number(v["weight_decay"], "optimizer.weight_decay", 0, 1);
  }
  if (v.contains("clip")) out.clip = read_number(v["clip"], "optimizer.clip", 0, 1e9);
  if (v.contains("batch_scaling")) {
    out.batch_scaling = read_string(v["batch_scaling"], "optimizer.batch_scaling",
                                    {"none", "sqrt", "linear"});
  }
  if (v.contains("reference_batch")) {
    out.reference_batch = read_int(v["reference_batch"], "optimizer.reference_batch", 1);
  }
  return out;
}

// `key`: "lr_schedule", or "schedule", the name older configs use for it.
LrSchedule parse_lr_schedule(const json& v, const std::string& key) {
  if (!v.is_object()) fail(key, "expected an object, got " + type_of(v));
  check_keys(v, key, {"kind", "warmup", "final_fraction"});
  LrSchedule out;
  if (v.contains("kind")) out.kind = read_string(v["kind"], key + ".kind", {"constant", "cosine"});
  if (v.contains("warmup")) out.warmup = read_int(v["warmup"], key + ".warmup", 0);
  if (v.contains("final_fraction")) {
    out.final_fraction = read_number(v["final_fraction"], key + ".final_fraction", 0, 1);
  }
  return out;
}

// "methods": a list of specs, or of {"method": spec, "batch": N | "max"}.
// One entry of "methods": a spec, or {"method": spec, "batch": N or "max", "model": {...}}.
struct MethodEntry {
  std::string method;
  int64_t batch = 0;
  std::optional<ModelConfig> model;  // the entry's own model, if it names one
  double carry_bias = std::nan("");
};

std::vector<MethodEntry> parse_methods(const json& v, int64_t batch) {
  if (!v.is_array() || v.empty()) {
    fail("methods", "expected a non-empty list of method specs, got " + type_of(v));
  }
  std::vector<MethodEntry> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto path = fmt::format("methods[{}]", i);
    MethodEntry entry;
    entry.batch = batch;
    if (v[i].is_string()) {
      entry.method = read_string(v[i], path);
    } else {
      if (!v[i].is_object() || !v[i].contains("method")) {
        fail(path, "expected a method spec or {\"method\": spec, \"batch\": N or \"max\", "
                   "\"model\": {...}}, got " + shown(v[i]));
      }
      check_keys(v[i], path, {"method", "batch", "model"});
      if (v[i].contains("batch")) {
        entry.batch = v[i]["batch"] == "max" ? 0 : read_int(v[i]["batch"], path + ".batch", 1);
      }
      entry.method = read_string(v[i]["method"], path + ".method");
      if (v[i].contains("model")) {
        entry.model = parse_model(v[i]["model"], entry.carry_bias, path + ".model");
      }
    }
    try {
      check_method_specs({entry.method});
    } catch (const c10::Error& error) {
      fail(path, error.what_without_backtrace());
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void read_counts(TrainConfig& out, const json& config) {
  auto count = [&](const char* key, int64_t& field, int64_t min) {
    if (config.contains(key)) field = read_int(config[key], key, min);
  };
  count("optimizer_steps", out.optimizer_steps, 1);
  count("eval_every", out.eval_every, 1);
  count("eval_batches", out.eval_batches, 1);
  count("eval_batch", out.eval_batch, 1);
  count("checkpoint_every", out.checkpoint_every, 1);
  count("batch_max", out.batch_max, 1);
  if (config.contains("time_limit_s")) {
    out.time_limit_s = read_positive_number(config["time_limit_s"], "time_limit_s");
  }
  if (config.contains("memory_budget_mib")) {
    out.memory_budget_bytes = read_mib(config["memory_budget_mib"], "memory_budget_mib");
  }
}

// The model reads the task's F, and the head the model's H and the task's targets: checked
// here, naming the key, rather than failing in the first step.
// `path`: "model", or the method entry's "methods[i].model" that names its own.
void check_model_and_head(const TrainConfig& config, const ModelConfig& model_in,
                          const Task& task, const std::string& path) {
  ModelConfig model_config = model_in;
  model_config.input_size = task.input_size();
  std::shared_ptr<RecurrentModule> model;
  try {
    model = make_model(model_config);
  } catch (const c10::Error& error) {
    fail(path, error.what_without_backtrace());
  }
  if (model->input_size() != task.input_size()) {
    fail(path + ".model_file", fmt::format("the task {} gives F = {} features per step; the model "
                                         "reads F = {} (its input_size)", task.describe(),
                                         task.input_size(), model->input_size()));
  }
  if (config.head.empty()) return;
  const auto head = make_head(config.head, model->output_size(), task.head_outputs(), true);
  if (head->input_size() != model->output_size()) {
    fail("head_file", fmt::format("the head reads Z = {} features per step (its input_size); the "
                                  "model \"{}\" gives H = {}", head->input_size(),
                                  model_in.kind, model->output_size()));
  }
  const HeadTargets wanted{task.head_kind() == "ce" ? HeadTargets::Kind::kClasses
                                                    : HeadTargets::Kind::kValues,
                           task.head_outputs()};
  const auto reads = head->targets();
  if (reads && !(*reads == wanted)) {
    fail("head_file", fmt::format("the task {} gives targets {}; the head reads {} (its "
                                  "num_classes / target_size)", task.describe(),
                                  wanted.describe(), reads->describe()));
  }
}

}  // namespace

double LrSchedule::lr_at(double base_lr, int64_t step, int64_t total_steps) const {
  if (step < warmup) return base_lr * double(step + 1) / double(warmup);
  if (kind == "constant") return base_lr;
  const double span = double(std::max<int64_t>(1, total_steps - warmup));
  const double progress = std::min(1.0, double(step - warmup) / span);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return base_lr * (final_fraction + (1.0 - final_fraction) * cosine);
}

double OptimizerConfig::lr_for_batch(int64_t batch) const {
  if (batch_scaling == "none") return lr;
  const double ratio = double(batch) / double(reference_batch);
  return lr * (batch_scaling == "sqrt" ? std::sqrt(ratio) : ratio);
}

std::string TrainRunSpec::label() const {
  if (model) return fmt::format("{}|model={}|seed={}", method, model->kind, seed);
  return fmt::format("{}|seed={}", method, seed);
}

TrainConfig parse_train_config(const json& config, const std::string& name) {
  if (!config.is_object()) fail("(top level)", "expected an object, got " + type_of(config));
  check_keys(config, "", kKeys, kRenamedKeys);
  TrainConfig out;
  out.source = config;
  out.name = config.contains("name") ? read_string(config["name"], "name") : name;
  TORCH_CHECK(config.contains("task"), "config task: missing (which task to train on)");
  out.task = config["task"];
  const auto task = make_task(out.task);  // checks it now, before any run
  TORCH_CHECK(config.contains("methods"), "config methods: missing (which gradient methods)");
  if (config.contains("model")) out.model = parse_model(config["model"], out.carry_bias);
  if (config.contains("head_file")) {
    try {
      out.head = add_head_file(read_string(config["head_file"], "head_file"), "");
    } catch (const c10::Error& error) {
      fail("head_file", error.what_without_backtrace());
    }
  }
  check_model_and_head(out, out.model, *task, "model");
  if (config.contains("optimizer")) out.optimizer = parse_optimizer(config["optimizer"]);
  if (config.contains("lr_schedule") && config.contains("schedule")) {
    fail("schedule", "expected one learning-rate schedule, got both \"lr_schedule\" and "
                     "\"schedule\" (its older name)");
  }
  for (const char* key : {"lr_schedule", "schedule"}) {
    if (config.contains(key)) out.lr_schedule = parse_lr_schedule(config[key], key);
  }
  read_counts(out, config);
  int64_t batch = 32;
  if (config.contains("batch")) batch = read_int(config["batch"], "batch", 1);
  if (out.optimizer.reference_batch == 0) out.optimizer.reference_batch = batch;
  std::vector<int64_t> seeds = {1};
  if (config.contains("seeds")) seeds = read_int_list(config["seeds"], "seeds", 0, false);
  if (config.contains("dtype")) {
    out.dtype = parse_dtype(read_string(config["dtype"], "dtype", {"float32", "float64"}));
  }
  if (config.contains("device")) out.device = parse_device(read_string(config["device"], "device"));
  if (config.contains("flush_denormals")) {
    if (!config["flush_denormals"].is_boolean()) {
      fail("flush_denormals", "expected true or false, got " + shown(config["flush_denormals"]));
    }
    out.flush_denormals = config["flush_denormals"].get<bool>();
  }
  const auto methods = parse_methods(config["methods"], batch);
  for (size_t i = 0; i < methods.size(); ++i) {
    if (methods[i].model) {
      check_model_and_head(out, *methods[i].model, *task, fmt::format("methods[{}].model", i));
    }
    try {
      check_method_takes_model(methods[i].method,
                               methods[i].model ? methods[i].model->kind : out.model.kind);
    } catch (const c10::Error& error) {
      fail(fmt::format("methods[{}]", i), error.what_without_backtrace());
    }
  }
  std::set<std::string> labels;
  for (const auto seed : seeds) {
    for (size_t i = 0; i < methods.size(); ++i) {
      const auto& entry = methods[i];
      TrainRunSpec run{entry.method, uint64_t(seed), entry.batch, entry.model, entry.carry_bias};
      if (!labels.insert(run.label()).second) {
        fail(fmt::format("methods[{}]", i), fmt::format("the run \"{}\" comes twice: give each "
             "entry another method spec or another model kind", run.label()));
      }
      if (entry.batch == 0 && out.memory_budget_bytes == 0) {
        fail("memory_budget_mib", "missing: method \"" + entry.method + "\" asks for batch "
             "\"max\", the largest batch that fits a memory budget");
      }
      out.runs.push_back(std::move(run));
    }
  }
  return out;
}

TrainConfig load_train_config(const std::string& path, const std::string& device) {
  auto config = read_json_file(path);
  if (!device.empty() && config.is_object()) config["device"] = device;
  return parse_train_config(config, std::filesystem::path(path).stem().string());
}

json with_current_key_names(const json& config) {
  json out = config;
  auto rename = [](json& object, const char* from, const char* to) {
    if (!object.is_object() || !object.contains(from) || object.contains(to)) return;
    object[to] = object[from];
    object.erase(from);
  };
  if (!out.is_object()) return out;
  rename(out, "steps", "optimizer_steps");
  if (out.contains("task")) rename(out["task"], "steps", "time_steps");
  return out;
}

}  // namespace vlrnn::experiments
