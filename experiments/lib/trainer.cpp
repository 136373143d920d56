#include "lib/trainer.h"

#include "lib/max_batch.h"
#include "lib/recorded_plan.h"
#include "lib/units.h"

#include "vlrnn/registry/heads.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/measure/timer.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Steps per slice of an evaluation pass: bounds its memory whatever T is.
constexpr int64_t kEvalSliceSteps = 256;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What one run trains: built from the seed alone, so every method of a seed starts from the
// same weights (the global generator is seeded, then the modules draw their initial values).
struct Trainee {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  std::unique_ptr<GradientMethod> method;
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& config,
                                                        const std::vector<torch::Tensor>& params) {
  if (config.kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(config.lr).momentum(config.momentum)
                    .weight_decay(config.weight_decay));
  }
  return std::make_unique<torch::optim::Adam>(
      params, torch::optim::AdamOptions(config.lr).weight_decay(config.weight_decay));
}

// Gates in LibTorch's order, LSTM (i, f, g, o) and GRU (r, z, n): the gate that keeps the
// state is rows [H, 2H) of every bias_ih / bias_hh ([4H] or [3H]), which LibTorch's modules
// and the block cells both name so. The whole bias goes into bias_hh.
void set_carry_bias(torch::nn::Module& model, int64_t hidden, double bias) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    const auto& name = item.key();
    auto& p = item.value();
    const auto leaf = name.substr(name.rfind('.') + 1);
    if (p.dim() != 1 || (p.size(0) != 4 * hidden && p.size(0) != 3 * hidden)) continue;
    if (leaf.rfind("bias_ih", 0) == 0) p.slice(0, hidden, 2 * hidden).fill_(0.0);
    if (leaf.rfind("bias_hh", 0) == 0) p.slice(0, hidden, 2 * hidden).fill_(bias);
  }
}

Trainee build_trainee(const TrainConfig& config, const Task& task, const TrainRunSpec& spec) {
  torch::manual_seed(spec.seed);
  ModelConfig model = config.model_of(spec);
  model.input_size = task.input_size();
  Trainee t;
  t.model = make_model(model);
  const double carry_bias = config.carry_bias_of(spec);
  if (!std::isnan(carry_bias)) set_carry_bias(*t.model, model.hidden_size, carry_bias);
  // The task's Linear + ce / mse, or the config's own head (head_file), which
  // load_train_config checked against the model and the task's targets.
  t.head = make_head(config.head.empty() ? task.head_kind() : config.head,
                     t.model->output_size(), task.head_outputs(), /*sparse_targets=*/true);
  t.model->to(config.device, config.dtype);
  t.head->to(config.device, config.dtype);
  t.parameters = t.model->parameters();
  for (const auto& p : t.head->parameters()) t.parameters.push_back(p);
  t.optimizer = make_optimizer(config.optimizer, t.parameters);
  t.method = make_method_from_spec(spec.method);
  return t;
}

SequenceBatch on_device(SequenceBatch batch, const TrainConfig& config) {
  batch.inputs = batch.inputs.to(config.device, config.dtype);
  batch.targets = batch.targets.is_floating_point() ? batch.targets.to(config.device, config.dtype)
                                                    : batch.targets.to(config.device);
  return batch;
}

struct StepResult {
  double loss = 0.0, grad_norm = 0.0, seconds = 0.0;
  int64_t iteration_peak_bytes = 0;
};

// One optimizer step: the method's gradients of the summed loss, divided by the scored
// steps (the mean's gradient), clipped, applied at `lr`.
// `batch` is this rank's share (NOTE [ Data-parallel training ]): the sums of the losses, the
// scored steps and the gradients are the global batch's once summed over the ranks.
StepResult train_step(Trainee& t, const SequenceBatch& batch, double lr, const TrainConfig& config,
                      int64_t step, const DataParallel& ranks) {
  const auto start = Clock::now();
  const Workload workload{*t.model, *t.head, batch, {}, Reduction::kSum};
  const auto measured = measure::measure_iteration(*t.method, workload, config.device);
  auto sums = torch::tensor({measured.loss.item<double>(), double(scored_steps(batch))},
                            torch::kDouble);
  ranks.sum({sums});
  const double scored = sums[1].item<double>();
  TORCH_CHECK(scored > 0, "train: batch ", step, " has no scored step (every target is a "
              "'no target' marker)");
  ranks.reduce_gradients(t.parameters, batch.batch_size(), Reduction::kSum);
  for (const auto& p : t.parameters) {
    if (p.grad().defined()) p.grad().div_(scored);
  }
  StepResult out;
  // Without clipping, an infinite bound: the same call measures the norm and scales nothing.
  out.grad_norm = torch::nn::utils::clip_grad_norm_(
      t.parameters, config.optimizer.clip > 0 ? config.optimizer.clip : INFINITY);
  for (auto& group : t.optimizer->param_groups()) group.options().set_lr(lr);
  t.optimizer->step();
  out.loss = sums[0].item<double>() / scored;
  TORCH_CHECK(std::isfinite(out.loss) && std::isfinite(out.grad_norm), "train: the loss or the "
              "gradient norm is not finite at step ", step + 1, " (loss ", out.loss, ", gradient "
              "norm ", out.grad_norm, "): the run diverged; lower optimizer.lr or set "
              "optimizer.clip");
  measure::synchronize(config.device);
  out.seconds = seconds_since(start);
  out.iteration_peak_bytes = measured.memory.iteration_peak_bytes;
  return out;
}

struct Evaluation {
  double loss = 0.0;  // mean per scored step
  double accuracy = -1.0;  // fraction of sequences classified right; -1: not a classification
};

// The class `head` predicts at each of S steps, z [1, S, Z] -> [S]: the class whose target
// costs the least loss (under cross-entropy, the most probable). Read through the head's own
// losses, so a head file that reads classes is judged as the built-in head is.
torch::Tensor predicted_classes(OutputModule& head, const torch::Tensor& z, int64_t classes) {
  std::vector<torch::Tensor> losses;
  for (int64_t c = 0; c < classes; ++c) {
    const auto target = torch::full({1, z.size(1)}, c, torch::dtype(torch::kLong).device(z.device()));
    losses.push_back(head.forward(z, target));  // [1, S]
  }
  return torch::stack(losses).argmin(0).squeeze(0);  // [C, 1, S] -> [S]
}

// Over the fixed evaluation batches (eval mode: no dropout), without gradients, in slices of
// kEvalSliceSteps: the mean loss per scored step, and when the task classifies sequences,
// the accuracy.
Evaluation evaluate(Trainee& t, const Task& task, const TrainConfig& config) {
  torch::NoGradGuard no_grad;
  t.model->eval();
  t.head->eval();
  double total = 0.0, scored = 0.0, correct = 0.0;
  for (int64_t i = 0; i < config.eval_batches; ++i) {
    // Seed 0 for every run: all runs are judged on the same held-out batches. validated()
    // fills h0 and clears the padding (NOTE [ Padded steps ]), as a training step has it;
    // run_model() applies resets where the task has them (NOTE [ Resets ]).
    const auto batch = on_device(task.batch(Split::kEval, i, config.eval_batch, 0), config);
    const auto checked = validated(Workload{*t.model, *t.head, batch});
    State state = checked.h0;
    for (int64_t t0 = 0; t0 < batch.time_steps(); t0 += kEvalSliceSteps) {
      const int64_t n = std::min(kEvalSliceSteps, batch.time_steps() - t0);
      const auto slice = checked.batch.slice(t0, n);
      auto [z, next] = run_model(checked, slice.inputs, t0, n, state);  // [Tb, B, Z]
      state = next;
      const auto mask = scored_mask(slice);  // [Tb, B]
      total += (t.head->forward(z, slice.targets) * mask).sum().item<double>();
      scored += double(mask.sum().item<int64_t>());
      if (task.classifies_sequences()) {
        const auto predicted = predicted_classes(*t.head, z.index({mask}).unsqueeze(0),
                                                 task.head_outputs());  // [S]
        correct += double((predicted == slice.targets.index({mask})).sum().item<int64_t>());
      }
    }
  }
  t.model->train();
  t.head->train();
  return {total / scored, task.classifies_sequences() ? correct / scored : -1.0};
}

std::string checkpoint_path(const std::string& dir, const std::string& run) {
  std::string name;
  for (char c : run) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '=' ||
                              c == '.' || c == '-') ? c : '_';
  return dir + "/" + name + ".pt";
}

struct Position {
  int64_t step = 0, batch = 0;
  double wall_s = 0.0;
};

// NOTE [ Resuming is bit-for-bit ] (trainer.h). Written to a temporary file and renamed:
// a kill while saving leaves the previous checkpoint.
void save_checkpoint(const std::string& path, Trainee& t, const Position& at,
                     const torch::Device& device) {
  torch::serialize::OutputArchive archive, model, head, optimizer, rng;
  t.model->save(model);
  t.head->save(head);
  t.optimizer->save(optimizer);
  RngState::capture(device).save(rng);
  archive.write("model", model);
  archive.write("head", head);
  archive.write("optimizer", optimizer);
  archive.write("rng", rng);
  archive.write("step", torch::tensor(at.step));
  archive.write("batch", torch::tensor(at.batch));
  archive.write("wall_s", torch::tensor(at.wall_s, torch::kDouble));
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  archive.save_to(path + ".tmp");
  std::filesystem::rename(path + ".tmp", path);
}

Position load_checkpoint(const std::string& path, Trainee& t, const torch::Device& device) {
  torch::serialize::InputArchive archive, model, head, optimizer, rng;
  archive.load_from(path);
  archive.read("model", model);
  archive.read("head", head);
  archive.read("optimizer", optimizer);
  archive.read("rng", rng);
  t.model->load(model);
  t.head->load(head);
  t.optimizer->load(optimizer);
  RngState::load(rng, device).restore();
  torch::Tensor step, batch, wall_s;
  archive.read("step", step);
  archive.read("batch", batch);
  archive.read("wall_s", wall_s);
  return {step.item<int64_t>(), batch.item<int64_t>(), wall_s.item<double>()};
}

// The largest batch whose iteration fits config.memory_budget_bytes, probed on the first
// training batch at each size; gradients and generators are left as they were.
int64_t find_batch(Trainee& t, const Task& task, const TrainConfig& config,
                   const TrainRunSpec& spec, const TrainHooks& hooks) {
  const auto generators = RngState::capture(config.device);
  auto fits = [&](int64_t batch) {
    const auto data = on_device(task.batch(Split::kTrain, 0, batch, spec.seed), config);
    const auto probe = probe_budget(*t.method, Workload{*t.model, *t.head, data, {},
                                    Reduction::kSum}, config.memory_budget_bytes, config.device);
    if (hooks.message) hooks.message(fmt::format("  {}: {}", spec.label(), describe(probe)));
    return probe.fits;
  };
  const int64_t batch = search_max_batch(1, config.batch_max, 1, fits);
  generators.restore();
  t.optimizer->zero_grad();
  TORCH_CHECK(batch > 0, "train: ", spec.label(), ": not even one sequence fits memory_budget_mib (",
              format_bytes(double(config.memory_budget_bytes)), ")");
  return batch;
}

// eval_loss (and eval_accuracy for a classification) into a step's record and the progress.
void log_evaluation(json& record, TrainProgress& progress, const Evaluation& evaluation) {
  record["eval_loss"] = progress.eval_loss = evaluation.loss;
  progress.eval_accuracy = evaluation.accuracy;
  if (evaluation.accuracy >= 0) record["eval_accuracy"] = evaluation.accuracy;
}

json step_record(const TrainConfig& config, const TrainRunSpec& spec, int64_t step, double lr,
                 const StepResult& r) {
  return {{"kind", "train_step"},
          {"key", fmt::format("{}|step={}", spec.label(), step)},
          {"run", spec.label()},
          {"method", spec.method},
          {"model", config.model_of(spec).kind},
          {"seed", spec.seed},
          {"batch", spec.batch},
          {"step", step},
          {"loss", r.loss},
          {"grad_norm", r.grad_norm},
          {"lr", lr},
          {"time_s", r.seconds},
          {"iteration_peak_bytes", r.iteration_peak_bytes}};
}

json run_record(const TrainConfig& config, const Task& task, const TrainRunSpec& spec,
                const Trainee& t, const Position& at, const TrainProgress& last) {
  json record = {{"kind", "train_run"},
                {"key", spec.label()},
                {"run", spec.label()},
                {"experiment", config.name},
                {"task", task.describe()},
                {"task_kind", task.kind()},
                {"chance_loss", task.chance_loss()},
                {"model", config.model_of(spec).kind},
                {"head", config.head.empty() ? task.head_kind() : config.head},
                {"H", t.model->output_size()},
                {"layers", config.model_of(spec).num_layers},
                {"method", spec.method},
                {"method_description", t.method->describe()},
                {"exact", t.method->is_exact()},
                {"seed", spec.seed},
                {"batch", at.batch},
                {"T", task.time_steps()},
                {"steps", at.step},
                {"final_loss", last.loss},
                {"final_eval_loss", last.eval_loss},
                {"clock_s", at.wall_s},
                {"status", "ok"}};
  if (last.eval_accuracy >= 0) record["final_eval_accuracy"] = last.eval_accuracy;
  // The last batch's plan (NOTE [ Recorded plans ]): a task of one length plans once.
  const auto plan = ran_plan_json(*t.method);
  if (!plan.is_null()) record["plan"] = plan;
  return record;
}

}  // namespace

double TrainProgress::eta_s() const {
  double eta = step > 0 ? wall_s / double(step) * double(total_steps - step) : -1.0;
  if (time_limit_s > 0) eta = eta < 0 ? time_limit_s - wall_s : std::min(eta, time_limit_s - wall_s);
  return eta < 0 ? -1.0 : eta;
}

std::vector<json> records_up_to(const std::vector<json>& records, const std::string& run,
                                int64_t step) {
  std::vector<json> kept;
  for (const auto& r : records) {
    const bool ours = r.value("run", std::string()) == run;
    if (!ours || (r.value("kind", std::string()) == "train_step" && r.value("step", 0) <= step)) {
      kept.push_back(r);
    }
  }
  return kept;
}

int64_t checkpoint_step(const std::string& checkpoint_dir, const std::string& run) {
  const auto path = checkpoint_path(checkpoint_dir, run);
  if (!std::filesystem::exists(path)) return -1;
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  torch::Tensor step;
  archive.read("step", step);
  return step.item<int64_t>();
}

TrainOutcome train_run(const TrainConfig& config, const Task& task, TrainRunSpec spec,
                       const std::string& checkpoint_dir, bool resume, const TrainHooks& hooks,
                       const DataParallel& ranks) {
  Trainee t = build_trainee(config, task, spec);
  ranks.check_agree("the training config and run",
                    config.source.dump() + "|" + spec.label() + "|" + t.method->describe());
  const auto path = checkpoint_path(checkpoint_dir, spec.label());
  Position at{0, spec.batch, 0.0};
  if (resume && std::filesystem::exists(path)) {
    at = load_checkpoint(path, t, config.device);
    if (hooks.message) hooks.message(fmt::format("{}: resumed at step {}", spec.label(), at.step));
  } else if (spec.batch == 0) {
    TORCH_CHECK(ranks.world_size() == 1, "train: ", spec.label(), ": \"batch\": \"max\" "
                "searches the batch that fits one process's memory, and ", ranks.world_size(),
                " ranks share a batch; give the global batch as a number");
    at.batch = find_batch(t, task, config, spec, hooks);
  }
  // Every rank resumes from the same step (rank 0's checkpoint, in a folder they share).
  ranks.check_agree("the step to resume from (is checkpoints/ one folder every rank sees?)",
                    std::to_string(at.step));
  spec.batch = at.batch;
  TrainProgress progress{spec.label(), at.step, config.optimizer_steps};
  progress.time_limit_s = config.time_limit_s;
  std::vector<json> pending;
  auto flush = [&] {
    if (hooks.log && ranks.is_root()) hooks.log(pending);
    pending.clear();
  };
  auto checkpoint = [&] {
    if (ranks.is_root()) save_checkpoint(path, t, at, config.device);
  };
  auto evaluation = [&] { return ranks.is_root() ? evaluate(t, task, config) : Evaluation{}; };
  auto time_is_up = [&] { return config.time_limit_s > 0 && at.wall_s >= config.time_limit_s; };
  bool stop_now = ranks.any(time_is_up());
  while (at.step < config.optimizer_steps && !stop_now) {
    const auto start = Clock::now();
    const auto global = task.batch(Split::kTrain, at.step, at.batch, spec.seed);
    const auto batch = on_device(ranks.share(global), config);
    const double lr = config.lr_schedule.lr_at(config.optimizer.lr_for_batch(at.batch), at.step,
                                               config.optimizer_steps);
    const auto result = train_step(t, batch, lr, config, at.step, ranks);
    at.wall_s += seconds_since(start);  // the training clock: steps, not evaluations
    auto record = step_record(config, spec, ++at.step, lr, result);
    record["clock_s"] = at.wall_s;
    const bool evaluate_now =
        at.step % config.eval_every == 0 || at.step == config.optimizer_steps;
    if (evaluate_now) log_evaluation(record, progress, evaluation());
    pending.push_back(record);
    progress.step = at.step;
    progress.loss = result.loss;
    progress.wall_s = at.wall_s;
    if (hooks.progress) hooks.progress(progress);
    if (at.step == hooks.stop_after_step) return {at.step, false, {}};  // as if killed here
    // Records first, then the checkpoint: a kill between the two leaves records past the
    // checkpoint, which resuming drops and logs again.
    const bool checkpoint_now = at.step % config.checkpoint_every == 0;
    if (evaluate_now || checkpoint_now) flush();
    if (checkpoint_now) checkpoint();
    // Whether any rank was asked to stop, and whether any ran out of time: one collective.
    auto stops = torch::tensor({int64_t(hooks.stop_requested && hooks.stop_requested()),
                                int64_t(time_is_up())}, torch::kLong);
    ranks.sum({stops});
    if (stops[0].item<int64_t>() > 0 && at.step < config.optimizer_steps) {
      flush();
      checkpoint();
      return {at.step, false, {}};
    }
    stop_now = stops[1].item<int64_t>() > 0;
  }
  // Stopped by the time limit between evaluations: the last step gets one.
  if (!pending.empty() && !pending.back().contains("eval_loss")) {
    log_evaluation(pending.back(), progress, evaluation());
  }
  flush();
  checkpoint();
  TrainOutcome out{at.step, true, run_record(config, task, spec, t, at, progress)};
  out.summary["world_size"] = ranks.world_size();
  if (hooks.log && ranks.is_root()) hooks.log({out.summary});
  return out;
}

}  // namespace vlrnn::experiments
