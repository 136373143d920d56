#pragma once
// A training config (`vlrnn train CONFIG`): one task, one model, and the runs to train on
// it — every method in `methods` with every seed in `seeds`. Runs with the same seed start
// from the same weights and see the same batches in the same order (NOTE [ Batches are a
// function of their index ] in lib/tasks.h), so their curves differ only by the method.
//
// {
//   "name": "train-copy",
//   "task": {"kind": "copy", "delay": 100, "symbols": 1},     (lib/tasks.h; adding and text
//                                    give their length T as "time_steps")
//   "model": {"kind": "lstm", "hidden": 64, "layers": 1, "dropout": 0},
//                  (a plugin's kind, or {"model_file": "cell.pt"}: a TorchScript model
//                   that fixes its own sizes, its F the task's)
//   "head_file": "head.pt",   (optional: a TorchScript head, vlrnn/core/script_head.h,
//                              instead of the task's Linear + ce / mse; it must read the
//                              model's H and the task's targets)
//   "methods": ["full", "vlrnn:block_length=16", {"method": "tbptt:k=16", "batch": 64},
//               {"method": "vlrnn:block_length=16", "model": {"kind": "mingru", "hidden": 64}}],
//   "seeds": [1, 2, 3], "batch": 32, "optimizer_steps": 1000,
//   "optimizer": {"kind": "adam", "lr": 0.003, "clip": 1.0},
//   "lr_schedule": {"kind": "cosine", "warmup": 50},   ("schedule" in older configs)
//   "eval_every": 50, "eval_batches": 4, "checkpoint_every": 100,
//   "flush_denormals": true   (optional, the default)
// }
// A method's "batch" may be "max": the largest batch whose iteration fits
// "memory_budget_mib" (found once per method on the first training batch). A method entry's
// "model" (the top-level "model"'s keys) trains that model instead of the config's, so one
// experiment can set models side by side on the same batches; its runs are labelled with
// the model's kind.
// "steps", the older name of both "optimizer_steps" and the task's "time_steps", is refused
// with a message naming the new keys (one word meant two counts).

#include "vlrnn/core/models.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vlrnn::experiments {

struct OptimizerConfig {
  std::string kind = "adam";  // "adam" | "sgd" (with momentum)
  double lr = 1e-3;
  double momentum = 0.9;       // sgd only
  double weight_decay = 0.0;
  double clip = 0.0;           // max global gradient norm; 0: no clipping
  // How lr follows a run's batch B when runs train at different batches ("batch": "max"):
  // lr * (B / reference_batch)^p with p = 0 ("none"), 1/2 ("sqrt", the usual rule for Adam)
  // or 1 ("linear", for SGD). reference_batch 0: the config's "batch".
  std::string batch_scaling = "none";
  int64_t reference_batch = 0;
  double lr_for_batch(int64_t batch) const;
};

// The learning rate at each step: constant, or cosine decay to final_fraction * lr; both
// after a linear warm-up of `warmup` steps.
struct LrSchedule {
  std::string kind = "constant";  // "constant" | "cosine"
  int64_t warmup = 0;
  double final_fraction = 0.0;
  double lr_at(double base_lr, int64_t step, int64_t total_steps) const;
};

// One training run: a method and a seed at a batch size, on the config's model or on the
// method entry's own.
struct TrainRunSpec {
  std::string method;  // a registry spec, e.g. "vlrnn:block_length=32"
  uint64_t seed = 1;
  int64_t batch = 32;  // 0: the largest that fits the memory budget
  // The method entry's own "model" and its carry_bias; none: the config's
  // (TrainConfig::model_of).
  std::optional<ModelConfig> model;
  double carry_bias = std::nan("");
  // "vlrnn:block_length=32|seed=1" ("vlrnn:block_length=32|model=mingru|seed=1" with its own model): the
  // run's key in results and its checkpoint folder's name.
  std::string label() const;
};

struct TrainConfig {
  std::string name = "train";
  nlohmann::json source;  // the config as written (meta.json; --resume checks it is unchanged)
  nlohmann::json task;  // built by make_task (lib/tasks.h)
  ModelConfig model;    // input_size comes from the task
  // The head kind: "" the task's own (Linear + ce or mse, lib/tasks.h), or a head file's
  // (its path, registered by add_head_file) or another registered head kind.
  std::string head;
  // "model": {"carry_bias": b}: the gate that keeps the state (an LSTM's forget gate, a
  // GRU's update gate z) starts at bias b, set after the default initialisation (NaN: left
  // alone). A bias of a few units carries the state across long delays from the first step,
  // where the default (about 0: half the state kept per step) forgets it within a few dozen
  // steps (Gers et al. 2000; Jozefowicz et al. 2015).
  double carry_bias = std::nan("");
  std::vector<TrainRunSpec> runs;  // seeds x methods, seed-major
  int64_t optimizer_steps = 1000;  // "optimizer_steps": the run's length in updates
  double time_limit_s = 0.0;  // > 0: a run also stops after this much training wall clock
  OptimizerConfig optimizer;
  LrSchedule lr_schedule;
  int64_t eval_every = 50;    // evaluate after every n-th step (and after the last)
  int64_t eval_batches = 4;   // evaluation batches (fixed: the same for every run)
  int64_t eval_batch = 64;    // their batch size
  int64_t checkpoint_every = 100;
  int64_t memory_budget_bytes = 0;  // for "batch": "max"
  int64_t batch_max = 4096;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  // Subnormal floats flushed to zero on the CPU while training: NOTE [ Denormals in long
  // backward passes ] (commands/train_command.cpp).
  bool flush_denormals = true;
  // The model a run trains, and its carry bias: the run's own, or the config's.
  const ModelConfig& model_of(const TrainRunSpec& run) const {
    return run.model ? *run.model : model;
  }
  double carry_bias_of(const TrainRunSpec& run) const {
    return run.model ? run.carry_bias : carry_bias;
  }
};

// Throws "config PATH: ..." naming the first field that is missing, unknown or invalid.
TrainConfig parse_train_config(const nlohmann::json& config, const std::string& name);
// `device`, when not empty (`vlrnn train --device`), replaces the file's "device"; the
// config recorded (and checked on --resume) says so too.
TrainConfig load_train_config(const std::string& path, const std::string& device = "");

// `config` as a config reads with today's key names: an older one's top-level "steps" as
// "optimizer_steps" and "task.steps" as "task.time_steps" (a key whose new name is there too
// stays). --resume compares a folder's meta.json "config" through this, so a run started
// before the rename resumes once its config file is rewritten with the new names.
nlohmann::json with_current_key_names(const nlohmann::json& config);

}  // namespace vlrnn::experiments
