#pragma once
// One training run of a config (lib/train_config.h): a model and head trained on a task
// with one gradient method and one seed, logged a step at a time and checkpointed.
//
// The loss of a step is the mean over its scored steps (lib/tasks.h: scored_steps): the
// method computes the sum (Reduction::kSum) and the gradients are divided by the count,
// so a task that scores one step in a thousand learns at the same scale as one that scores
// them all.
//
// NOTE [ Resuming is bit-for-bit ]
// A checkpoint holds everything the next step depends on: the parameters of model and
// head, the optimizer's state (Adam's moments and step counts, SGD's momentum buffers),
// the generators (dropout masks are drawn from them), the batch size, and the step count,
// which is also the data position (NOTE [ Batches are a function of their index ]).
// Resuming drops the records a run logged after its last checkpoint and logs those steps
// again, so results.jsonl reads as if the run had never stopped: the same losses, gradient
// norms and weights; only time_s and clock_s (the training clock, which the kill's lost
// time does not count) differ. This assumes deterministic kernels, which LibTorch's CPU
// kernels and OpenBLAS at a fixed thread count are.

#include "lib/tasks.h"
#include "lib/train_config.h"

#include "vlrnn/distributed/data_parallel.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace vlrnn::experiments {

struct TrainProgress {
  std::string run;  // TrainRunSpec::label()
  int64_t step = 0, total_steps = 0;
  double loss = 0.0;
  double eval_loss = -1.0;  // the last evaluation's loss; -1 before the first
  double eval_accuracy = -1.0;  // its accuracy (Task::classifies_sequences); -1: none
  double wall_s = 0.0;      // training clock of this run
  double time_limit_s = 0.0;  // TrainConfig::time_limit_s
  // Seconds of training clock left: by the steps' rate, or the time limit when sooner.
  double eta_s() const;
};

struct TrainHooks {
  // Records to append to results.jsonl (called at each evaluation, checkpoint and the end).
  std::function<void(const std::vector<nlohmann::json>&)> log;
  std::function<void(const TrainProgress&)> progress;  // after every step
  std::function<void(const std::string&)> message;     // batch search, resume, ...
  // Asked after every step: true stops the run there, its records and a checkpoint written
  // (NOTE [ Stopping a long run ]); --resume continues it.
  std::function<bool()> stop_requested;
  // For tests: a run stops after this step as a killed process would (no checkpoint, no
  // flush of the records since the last one); 0: never.
  int64_t stop_after_step = 0;
};

// What one finished or interrupted run reached.
struct TrainOutcome {
  int64_t steps = 0;  // steps done
  bool finished = false;
  nlohmann::json summary;  // the run's "train_run" record
};

// Trains `spec` from its checkpoint under `checkpoint_dir` when one is there (and
// `resume`), else from the start (NOTE [ Resuming is bit-for-bit ]).
//
// NOTE [ Data-parallel training ]: with `ranks` of several processes, each trains its share
// of every batch, and the ranks sum their summed losses' gradients and scored steps before
// dividing (vlrnn/distributed/data_parallel.h), so every rank takes the step one process
// takes on the whole batch. The ranks agree at the start on the config and run (else every
// rank throws), and after every step on whether to stop (a signal or the time limit on any
// rank stops all). Rank 0 alone evaluates, checkpoints and calls hooks.log; every rank
// resumes from rank 0's checkpoint, so checkpoint_dir must be one folder they all see.
TrainOutcome train_run(const TrainConfig& config, const Task& task, TrainRunSpec spec,
                       const std::string& checkpoint_dir, bool resume, const TrainHooks& hooks,
                       const DataParallel& ranks = DataParallel::one_process());

// The records of runs other than `run` plus those of `run` up to `step` (inclusive).
std::vector<nlohmann::json> records_up_to(const std::vector<nlohmann::json>& records,
                                          const std::string& run, int64_t step);
// The step of `run`'s checkpoint under `checkpoint_dir`, -1 when it has none.
int64_t checkpoint_step(const std::string& checkpoint_dir, const std::string& run);

}  // namespace vlrnn::experiments
