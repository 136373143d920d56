#pragma once
// A stream of unknown length: push its chunks as they come, get the exact gradient of the
// whole stream at finish(). The states held are bounded by a budget set up front (online
// checkpointing, vlrnn/schedule/online.h: s slots, h0's included) whatever length the
// stream turns out to have; the chunks pushed are the caller's and are kept until finish().
// Shapes: a chunk is inputs [n, B, F] and targets [n, B] or [n, B, O], time-major as
// SequenceBatch; every chunk has the stream's B and F, and the stream's T is the sum of the
// n. Every sequence runs the whole stream (no lengths).
//
// NOTE [ A stream runs one step behind ]
// push() advances the forward pass without grad up to the newest step pushed, not through
// it: only finish() says which step is the last, and the last runs with grad from the state
// before it, as in online_schedule(T, s), whose ops the stream runs: the forward phase as the
// chunks come (each kept state stored when the rule keeps it), then the reversal. So its step
// counters equal the schedule's; a step's input is read twice at most while it is pushed.
//
// NOTE [ The reversal, interval by interval ]
// finish() runs each interval of online_intervals() as one call of the one executor on a
// workload of the interval's steps: h0 the kept state at its start (a fresh leaf, whose
// .grad is δh there), final_state_grad the δh the later interval left (NOTE [ Gradients
// across calls ]), the generators as they were at that state. Such a workload's inputs are one
// tensor: a view of the chunk when the interval lies within one chunk, else a copy of the
// interval's steps, freed before the next interval (push fewer, larger chunks to avoid it).
// A MEAN loss weighs every step 1 / (T·B), known only at finish(): the calls sum, through
// the caller's head scaled by that weight (the same products as a MEAN weight makes).
//
// NOTE [ The stream's random numbers ]
// The steps draw from the generators as one forward pass over the whole stream would, and
// each kept state keeps the generators' state at its step, so a recomputed step draws what
// it drew the first time. That needs the generators left alone between pushes while the
// model draws (dropout): push() and finish() refuse to go on when they moved, rather than
// compute a gradient that is not exact. After finish() they are where one forward pass over
// the stream leaves them.

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/online.h"
#include "vlrnn/schedule/online_method.h"

#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace vlrnn {

class OnlineStream {
 public:
  // `model` and `head` are the caller's and must outlive the stream. `h0`: empty = the
  // model's zeros.
  OnlineStream(RecurrentModule& model, OutputModule& head, OnlineOptions budget = {},
               Reduction reduction = Reduction::kMean, State h0 = {});

  // Appends a chunk: inputs [n, B, F], targets [n, B(, O)], n >= 1.
  void push(const torch::Tensor& inputs, const torch::Tensor& targets);
  // Ends the stream and back-propagates it (plus `final_state_grad`, dL/d(final state) from a
  // later consumer: NOTE [ Gradients across calls ]); accumulates into .grad and returns
  // what GradientMethod::compute returns for the whole stream. Once. `loss_scale`: the
  // gradients are the loss's times it, as Workload::loss_scale (NOTE [ Loss scale ]).
  GradientResult finish(const State& final_state_grad = {}, double loss_scale = 1.0);

  int64_t steps() const { return steps_; }
  // s; from a bytes budget, known once the first chunk shows the state's size (0 before).
  int64_t slots() const { return checkpointer_ ? checkpointer_->slots() : 0; }
  // States held now besides h0: the kept states and the working state (at most s).
  int64_t held_states() const;
  // The most held_states() has been (the working state's advance not counted twice).
  int64_t peak_held_states() const { return peak_held_; }
  // Steps run so far (finish() adds the reversal's).
  const StepCounters& counters() const { return counters_; }

 private:
  struct Chunk {
    int64_t begin;          // the stream step of its first row
    torch::Tensor inputs;   // [n, B, F]
    torch::Tensor targets;  // [n, B(, O)]
  };
  struct Kept {
    State state;
    RngState rng;  // the generators at this state (NOTE [ The stream's random numbers ])
  };

  void check_usable(const char* call) const;
  void check_chunk(const torch::Tensor& inputs, const torch::Tensor& targets) const;
  // Runs `run`; when it throws, puts the generators back and marks the stream failed.
  void failing_midway(const std::function<void()>& run);
  // finish()'s reversal (NOTE [ The reversal, interval by interval ]).
  GradientResult reverse_stream(const State& final_state_grad, double loss_scale);
  void start(const torch::Tensor& inputs, const torch::Tensor& targets);
  void check_generators(const char* call) const;
  // Advances the working state without grad to stream step `position`.
  void run_until(int64_t position);
  // Steps [begin, end) as one batch: a view of a chunk, or a copy when chunks split it.
  SequenceBatch batch_of(int64_t begin, int64_t end) const;
  const Chunk& chunk_at(int64_t step) const;
  void note_held();

  RecurrentModule& model_;
  OutputModule& head_;
  OnlineOptions budget_;
  Reduction reduction_;
  State h0_;
  std::vector<Chunk> chunks_;
  int64_t steps_ = 0;
  std::optional<schedule::OnlineCheckpointer> checkpointer_;
  std::map<int64_t, Kept> kept_;  // position -> kept state; 0: h0
  State working_;                 // the state at working_at_
  int64_t working_at_ = 0;
  RngState generators_after_;     // where the steps run so far left the generators
  bool model_draws_ = false;      // the generators moved while the model ran
  StepCounters counters_;
  int64_t peak_held_ = 0;
  bool finished_ = false;
  bool failed_ = false;           // a call threw midway: the states are not what the rule says
};

}  // namespace vlrnn
