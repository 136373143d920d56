#include "vlrnn/schedule/cost_measurement.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/schedule/line_fit.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/measure/timer.h"
#include "vlrnn/methods/block.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>

namespace vlrnn::schedule {
namespace {

int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? int64_t(t.numel()) * int64_t(t.element_size()) : 0;
}

int64_t bytes_of(const State& s) {
  int64_t bytes = 0;
  for (const auto& t : s) bytes += bytes_of(t);
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One length's measurements: seconds and bytes of each phase.
struct Phase {
  double advance_s = 0, forward_grad_s = 0, backward_s = 0;
  int64_t advance_peak = 0, tape = 0, backward_peak = 0, head_backward_peak = 0;
};

// NOTE [ One block, measured ]: block [t0, t0 + n) of `workload` run as the executor runs
// it: an advance without grad from `entry`, then a tape from its detached leaves over
// `inputs` [n, B, F] and the backward from both roots (seeds of ones), each timed and
// measured in a step scope of its own.
struct TapeRun {
  double forward_grad_s = 0, backward_s = 0;
  int64_t tape = 0, backward_peak = 0;
};

struct BlockRun {
  double advance_s = 0;
  int64_t advance_peak = 0;
  TapeRun taped;
  State exit;  // the advance's exit
};

// The tape and its backward alone.
TapeRun run_tape(const Workload& workload, const torch::Tensor& inputs, int64_t t0, int64_t n,
                 const State& entry, measure::DeviceTimer& timer) {
  const auto device = workload.batch.inputs.device();
  TapeRun run;
  const State leaves = entry.detached_leaves();
  measure::IterationMemoryScope scope(device);
  timer.start();
  auto block = forward_block(workload, inputs, t0, n, leaves);
  run.forward_grad_s = timer.stop();
  const auto taped = scope.finish();
  run.tape = taped.end_bytes - taped.start_bytes;
  std::vector<torch::Tensor> seeds;
  for (const auto& h : block.exit) seeds.push_back(torch::ones_like(h));
  const State exit_grad(std::move(seeds));
  measure::IterationMemoryScope back(device);
  timer.start();
  backward_block(block, exit_grad);
  run.backward_s = timer.stop();
  block = BlockForward();
  run.backward_peak = back.finish().iteration_peak_bytes;
  return run;
}

BlockRun run_block(const Workload& workload, const torch::Tensor& inputs, int64_t t0, int64_t n,
                   const State& entry, measure::DeviceTimer& timer) {
  BlockRun run;
  {
    measure::IterationMemoryScope scope(workload.batch.inputs.device());
    timer.start();
    run.exit = forward_no_grad(workload, t0, n, entry);
    run.advance_s = timer.stop();
    run.advance_peak = scope.finish().iteration_peak_bytes;
  }
  run.taped = run_tape(workload, inputs, t0, n, entry, timer);
  return run;
}

Phase measure_length(const Workload& workload, int64_t n, int64_t repeats) {
  const auto device = workload.batch.inputs.device();
  // The first n steps, every sequence active, inputs without grad: a block in the middle of
  // a chain (its entry is a leaf that requires grad, as in every method's later blocks).
  SequenceBatch batch;
  batch.inputs = workload.batch.inputs.narrow(0, 0, n).detach();    // [n, B, F]
  batch.targets = workload.batch.targets.narrow(0, 0, n);           // [n, B, ...]
  const Workload sub{workload.model, workload.head, batch, workload.h0.detached(),
                     workload.reduction};
  Phase p;
  std::vector<double> adv, fwd, bwd;
  measure::DeviceTimer timer(device);
  for (int64_t r = 0; r < repeats + 1; ++r) {  // the first round warms up, untimed
    const BlockRun run = run_block(sub, batch.inputs, 0, n, sub.h0, timer);
    p.advance_peak = run.advance_peak;
    p.tape = run.taped.tape;
    p.backward_peak = run.taped.backward_peak;
    if (r > 0) {
      adv.push_back(run.advance_s);
      fwd.push_back(run.taped.forward_grad_s);
      bwd.push_back(run.taped.backward_s);
    }
  }
  p.advance_s = median(adv);
  p.forward_grad_s = median(fwd);
  p.backward_s = median(bwd);
  // The head alone on outputs z [n, B, Z]: its backward's peak (exact bytes, so once).
  const auto z = torch::randn({n, batch.batch_size(), workload.model.output_size()},
                              batch.inputs.options()).requires_grad_(true);
  auto head = head_loss(sub, z, 0, n);
  measure::IterationMemoryScope back(device);
  head.loss.backward();
  head = HeadLoss();
  p.head_backward_peak = back.finish().iteration_peak_bytes;
  return p;
}

// Bytes of the parameters that want gradients, the model's and the head's.
int64_t parameter_bytes(const Workload& workload) {
  int64_t bytes = 0;
  for (const auto& p : workload.model.parameters()) bytes += p.requires_grad() ? bytes_of(p) : 0;
  for (const auto& p : workload.head.parameters()) bytes += p.requires_grad() ? bytes_of(p) : 0;
  return bytes;
}

// Slope and intercept of a line through (n1, v1) and (n2, v2), both clamped at >= 0.
std::pair<double, double> fit(double v1, double v2, int64_t n1, int64_t n2) {
  const double slope = std::max(0.0, (v2 - v1) / double(n2 - n1));
  return {slope, std::max(0.0, v1 - slope * double(n1))};
}

// The iteration peak of the executor running uniform_schedule(n, k) on the first n steps, every
// sequence active, measured as measure_iteration measures a method (gradients cleared first).
// With `entry` (the state at step a): on steps [a, a + n) of the batch, lengths included.
measure::IterationMeasurement executor_step(const Workload& workload, int64_t n, int64_t k,
                                            int64_t a = 0, const State* entry = nullptr) {
  const auto& x = workload.batch.inputs;
  SequenceBatch batch;
  batch.inputs = x.narrow(0, a, n).detach().requires_grad_(x.requires_grad());  // [n, B, F]
  batch.targets = workload.batch.targets.narrow(0, a, n);
  // A sequence ended before a runs one step (a length must be >= 1): a little over.
  if (entry) batch.lengths = (workload.batch.lengths - a).clamp(1, n);  // [B]
  std::vector<torch::Tensor> h0;
  for (const auto& h : entry ? *entry : workload.h0) {
    h0.push_back(h.detach().requires_grad_(h.requires_grad()));
  }
  const Workload sub{workload.model, workload.head, batch, State(std::move(h0)),
                     workload.reduction};
  ScheduleMethod method("calibration", "calibration",
                        [n, k](const Workload&) { return uniform_schedule(n, k); });
  return measure::measure_iteration(method, sub, x.device());
}

int64_t executor_peak(const Workload& workload, int64_t n, int64_t k) {
  return executor_step(workload, n, k).memory.iteration_peak_bytes;
}

// Per-step and per-call costs of the fused path (every sequence active), from the first n1
// and n2 steps (NOTE [ Fitting the cost model ]).
struct PrefixFit {
  double advance_s = 0, forward_grad_s = 0, backward_s = 0;  // seconds per step
  double advance_b = 0, tape_b = 0, tape_op_b = 0;  // bytes per step; tape_op_b per tape
  double advance_op_b = 0;  // per advance call, its exit state among them
  double backward_peak_b = 0, backward_peak_op_b = 0;  // measure_length's backward peak
  double head_backward_peak_b = 0;  // the head's backward peak per step (its output gradient)
  int64_t n1 = 0, n2 = 0;
};

PrefixFit fit_prefix(const Workload& workload, const CostMeasureOptions& options) {
  PrefixFit f;
  const int64_t T = workload.batch.time_steps();
  f.n2 = std::min(options.long_steps, T);
  f.n1 = std::min(options.short_steps, std::max<int64_t>(1, f.n2 - 1));
  const bool two = f.n2 > f.n1;  // T = 1: one length; everything is per step
  const Phase p1 = two ? measure_length(workload, f.n1, options.repeats) : Phase();
  const Phase p2 = measure_length(workload, f.n2, options.repeats);
  const auto line = [&](double v1, double v2) {
    return two ? fit(v1, v2, f.n1, f.n2) : std::pair<double, double>{v2, 0.0};
  };
  f.advance_s = line(p1.advance_s, p2.advance_s).first;
  f.forward_grad_s = line(p1.forward_grad_s, p2.forward_grad_s).first;
  f.backward_s = line(p1.backward_s, p2.backward_s).first;
  std::tie(f.advance_b, f.advance_op_b) =
      line(double(p1.advance_peak), double(p2.advance_peak));
  std::tie(f.tape_b, f.tape_op_b) = line(double(p1.tape), double(p2.tape));
  std::tie(f.backward_peak_b, f.backward_peak_op_b) =
      line(double(p1.backward_peak), double(p2.backward_peak));
  f.head_backward_peak_b = line(double(p1.head_backward_peak), double(p2.head_backward_peak)).first;
  return f;
}

// NOTE [ What a call costs ]: a schedule of one-step blocks makes three calls per step, so
// its time is mostly per-call seconds, which neither the intercept of a line through two
// lengths nor a one-step block timed alone gives reliably (the first swings tenfold between
// runs, the second costs more than among its kind). So the executor times n = kCallSteps
// steps as uniform(K=1) and as one tape, the same steps in 3n - 1 calls and in 2: the calls
// explain the difference beyond the advance's n - 1 steps. A call past the first end of a
// variable-length batch takes the model's lengths path, which costs more (NOTE [ Runs between
// ends ] in models.cpp): the same pair timed on n steps past the first end prices it. Medians
// of kCallRepeats. Measured: docs/methods.md, "Calibration, measured".
constexpr int64_t kCallSteps = 16, kCallRepeats = 7;

struct CallSeconds {
  double op = 0;     // a call of the fused path, beyond its steps
  double ended = 0;  // what a call past the first end costs more
};

// Per call of uniform(K=1) over n steps from `from` beyond one tape of them: the median of
// kCallRepeats, less `fused_calls` calls of `op` seconds, over the rest.
double seconds_per_call(const Workload& workload, const PrefixFit& f, int64_t from, int64_t n,
                        const State* entry, int64_t fused_calls, double op) {
  std::vector<double> per_call;
  for (int64_t r = 0; r <= kCallRepeats; ++r) {  // the first round warms up, untimed
    const double calls = executor_step(workload, n, 1, from, entry).seconds;
    const double tape = executor_step(workload, n, n, from, entry).seconds;
    if (r == 0) continue;
    per_call.push_back((calls - tape - f.advance_s * double(n - 1) - op * double(fused_calls)) /
                       double(3 * n - 3 - fused_calls));
  }
  return std::max(0.0, median(per_call));
}

// `first_end`: the first step some sequence no longer has (T: none before T); `active` [T]:
// the sequences running at each step (active_sequences_of; empty without lengths).
CallSeconds measure_call_seconds(const Workload& workload, const PrefixFit& f,
                                 int64_t first_end, const std::vector<int64_t>& active) {
  const int64_t T = workload.batch.time_steps();
  const int64_t n = std::min(kCallSteps, T);
  if (n < 2) return {};
  // The entry's values do not matter to the time; with one, the sub-batch keeps its lengths
  // (a call of the fused path checks them), unless some end within it.
  const State entry = workload.h0.detached();
  CallSeconds c;
  const bool with_lengths = workload.batch.has_lengths() && first_end >= n;
  c.op = seconds_per_call(workload, f, 0, n, with_lengths ? &entry : nullptr, 0, 0.0);
  if (first_end >= T) return c;
  // Past the first end: from the first step with no more sequences active than on average
  // over the steps from the first end to the last that any runs.
  int64_t last = first_end, active_sum = 0;  // sequence-steps active in [first_end, last)
  for (; last < T && active[size_t(last)] > 0; ++last) active_sum += active[size_t(last)];
  int64_t at = last;
  for (int64_t t = first_end; t < last; ++t) {
    if (active[size_t(t)] * (last - first_end) <= active_sum) {
      at = t;
      break;
    }
  }
  const int64_t from = std::min(at - 1, T - n);
  if (from < first_end - 1 || n < 3) return c;
  c.ended = std::max(0.0, seconds_per_call(workload, f, from, n, &entry, 3, c.op) - c.op);
  return c;
}

// A stored state: what an advance's exit keeps alive (its storages, which may be larger
// than the state's own bytes) plus a generator snapshot — but only for a model that draws
// random numbers: otherwise every snapshot shares one tensor (NOTE [ Shared RNG snapshots ]).
struct StateCost {
  int64_t exit = 0;      // bytes an advance's exit state keeps alive
  int64_t stored = 0;    // bytes of one stored state, snapshot included when it counts
  int64_t snapshot = 0;  // bytes of one generator snapshot
};

StateCost measure_state(const Workload& workload) {
  const auto device = workload.batch.inputs.device();
  const auto before = RngState::capture(device);
  StateCost c;
  {
    measure::IterationMemoryScope scope(device);
    auto exit = forward_no_grad(workload, 0, 1, workload.h0.detached());
    const auto mem = scope.finish();
    c.exit = std::max(bytes_of(exit), mem.end_bytes - mem.start_bytes);
  }
  const bool draws_random_numbers = !RngState::capture(device).shares_storage_with(before);
  c.snapshot = RngState::capture(device).bytes();
  c.stored = c.exit + (draws_random_numbers ? c.snapshot : 0);
  return c;
}

// NOTE [ Calibrating the peak end to end ]: the parameter gradients, autograd's buffers
// that sum a weight's gradient over the steps of a tape, the generator snapshots and
// whatever else a gradient step allocates are not worth modelling one by one: the
// executor's own iteration peak on sub-chains fixes them. A one-step tape (n = 1, no sums)
// gives the fixed bytes F0; full tapes of a ladder of lengths give the per-call and per-step
// backward transient on top of the tape (NOTE [ A transient that stops growing ]); two
// one-step tapes give the extra bytes of a backward call after the first (NOTE [ A later
// backward's bytes ]); two two-step tapes the floor of such a call (NOTE [ A later
// backward's floor ]).
struct EndToEnd {
  int64_t f0 = 0;  // fixed bytes of a one-step chain (parameter gradients among them)
  double backward_step = 0, backward_call = 0;
  // NOTE [ Backward windows ]: a buffer of at most backward_window steps, window_step bytes
  // each; backward_window 0: the transient grows with the tape, as far as measured.
  int64_t backward_window = 0;
  double window_step = 0;
  // Signed, as the backward's per-call bytes: beyond F0, which holds the one-step chain's
  // step of transient (fill_backward_call_terms).
  int64_t later = 0;  // NOTE [ A later backward's bytes ]
  int64_t floor = 0;  // NOTE [ A later backward's floor ]
  // (n, seconds) of the ladder's full tapes: fit_tape_growth fits them.
  std::vector<std::pair<int64_t, double>> full_tapes;
};

// NOTE [ A transient that stops growing ]: most models' backward transient grows with the
// tape, but a model that reverses a long tape in chunks (lstm_block: NOTE [ lstm_block backward
// in chunks ]) fills one chunk's buffer whatever the tape's length, and a chord between two
// short tapes, extrapolated, then over-predicts long ones badly. So the residual r(n) is
// measured on a ladder of full tapes (8, 32, 128, 512 where the growth bends, 1024 steps, up
// to T). Where a segment grows by less than kStoppedGrowing of the chord before it, the buffer
// is full: r(n) = call + grow · n + buffer · min(n, W) (NOTE [ Backward windows ] in
// cost_model.h), exact where W is a rung short of the longest. Where none stops, the chord
// from the shortest to the longest tape (the planner's measured margin covers the few percent
// it may under-predict beyond it). Measured: docs/methods.md, "Calibration, measured".
// A segment that grows by less than this fraction of the chord's slope has stopped growing.
constexpr double kStoppedGrowing = 0.5;

// `allowance`: what F0 holds beyond the parameter gradients, the most a negative intercept
// may take back from it (fill_iteration_terms).
void fit_backward_transient(EndToEnd& e, const std::vector<int64_t>& lengths,
                            const std::vector<double>& residuals, double allowance) {
  const size_t last = lengths.size() - 1;
  if (last == 0) {
    e.backward_call = std::max(0.0, residuals[0]);
    return;
  }
  // The chord from the shortest tape to tape j, exact at tape j. Its intercept may be
  // negative, down to minus its slope and to minus the allowance: the residuals are taken
  // beyond F0, which holds the one-step chain's own step of transient (NOTE [ What a call
  // holds, whatever its length ]). Below that (the peak of a short tape's backward comes
  // once part of the tape is freed, so it lies below the line), the line through tape j
  // from the one-step chain (1, 0), or from (0, -allowance) where F0 holds less: it
  // over-predicts the shorter tapes a little rather than every tape by the clamped
  // intercept.
  const auto chord_to = [&](size_t j) {
    const double slope = std::max(
        0.0, (residuals[j] - residuals[0]) / double(lengths[j] - lengths[0]));
    const double call = residuals[0] - slope * double(lengths[0]);
    if (call >= -std::min(slope, allowance)) return std::make_pair(slope, call);
    const double rj = std::max(0.0, residuals[j]);
    const double below = std::min(allowance, rj / double(lengths[j] - 1));
    return std::make_pair((rj + below) / double(lengths[j]), -below);
  };
  for (size_t i = 2; i <= last; ++i) {
    const auto [slope, call] = chord_to(i - 1);
    const double segment =
        (residuals[i] - residuals[i - 1]) / double(lengths[i] - lengths[i - 1]);
    if (slope <= 0.0 || segment >= kStoppedGrowing * slope) continue;
    const double grow = std::clamp((residuals[last] - residuals[i - 1]) /
                                       double(lengths[last] - lengths[i - 1]),
                                   0.0, slope);
    e.backward_call = call;
    e.backward_step = grow;
    e.window_step = slope - grow;
    if (e.window_step <= 0.0) break;  // nothing stops growing after all: the chord
    const double width =
        (residuals[last] - call - grow * double(lengths[last])) / e.window_step;
    e.backward_window = std::clamp<int64_t>(int64_t(std::llround(width)), lengths[i - 1],
                                            lengths[last]);
    return;
  }
  e.window_step = 0.0;
  e.backward_window = 0;
  std::tie(e.backward_step, e.backward_call) = chord_to(last);
}

// The longest tape calibration runs is kLongestMeasuredTape (cost_model.h): the memory of full
// BPTT over this many steps (or T), once, outside any measured step. Long enough to see
// lstm_block's chunk stop the transient growing at H·B up to 2048 (its chunk is 2^20 / (H·B)
// steps).
// The ladder of full tapes (NOTE [ A transient that stops growing ]): from kShortestLadderTape
// steps, each kLadderRatio times the one before, up to the longest; a last rung within
// kShortSegment of the one before replaces it.
constexpr int64_t kShortestLadderTape = 8, kLadderRatio = 4;
constexpr double kShortSegment = 1.5;
// NOTE [ Rungs where the growth bends ]: past a few dozen steps the residual grows on one line
// for every kind measured but lstm_block, so a rung between the third (128 steps) and the
// longest adds nothing the chord does not know, and its tape takes a third of the ladder's
// time. So the first kFirstRungs rungs and the longest run first, and the rungs between only
// where the growth from the third to the longest is below kSlowerGrowth of the growth from
// the second to the third (lstm_block: 0.53); there the whole ladder is fitted.
constexpr size_t kFirstRungs = 3;
constexpr double kSlowerGrowth = 0.9;
// NOTE [ A later backward's bytes ]: a backward call after the first finds the parameter
// gradients there, so autograd computes the new ones in buffers and adds them in (the first
// hands its buffers over as the gradients): about a gradient's worth beyond its transient,
// whatever its length. So one term, measured on two one-step tapes (the second reversed
// first), prices a later call of any length, and one of two steps or more needs at least its
// sums (CostModel::PerBackward::call_bytes).
// NOTE [ A later backward's floor ]: such a call also sums its weights' per-step gradients and
// adds the sum in: weight-sized buffers, whatever the tape's length, which what grows with the
// tape (fitted on tapes of 8 steps or more) under-prices for short tapes. The executor's own
// peak on two tapes of kFloorTapeSteps steps from step 0 fixes it: what the model so far
// leaves unexplained there beyond that tape's transient (fill_backward_call_terms). Beyond it,
// because a short tape near the end of a batch, with fewer sequences running, needs less.
// Measured, both: docs/methods.md, "Calibration, measured".

EndToEnd calibrate_end_to_end(const Workload& workload, const PrefixFit& f,
                              int64_t fixed_per_step) {
  const int64_t T = workload.batch.time_steps();
  EndToEnd e;
  // NOTE [ One tape's own bytes ]: F0 keeps what a tape holds whatever its length (its loss,
  // its exit state: the intercept of the tape's bytes), so the model charges it once, in the
  // fixed bytes: a tape is alive at every backward, where the peaks are. Where the one tape in
  // F0 is not the right count, the terms say so: an advance holds no tape being reversed
  // (iteration.reversal_bytes), a kept tape holds its own beside it (call.kept_tape_bytes).
  e.f0 = std::max<int64_t>(0, executor_peak(workload, 1, 1) - int64_t(f.tape_b) - fixed_per_step);
  // The residual of a chain of n steps: what the model so far does not explain.
  const auto residual = [&](int64_t n, int64_t k) {
    const auto run = executor_step(workload, n, k);
    if (k == n) e.full_tapes.emplace_back(n, run.seconds);
    return double(run.memory.iteration_peak_bytes - e.f0 - fixed_per_step * n) -
           f.tape_b * double(k);
  };
  if (T >= 2) {
    const int64_t longest = std::min<int64_t>(T, kLongestMeasuredTape);
    std::vector<int64_t> lengths{
        std::max<int64_t>(2, std::min<int64_t>(kShortestLadderTape, longest - 1))};
    while (lengths.back() * kLadderRatio < longest) {
      lengths.push_back(lengths.back() * kLadderRatio);
    }
    // The longest last, replacing a point within kShortSegment of it.
    if (lengths.size() > 1 && double(longest) < kShortSegment * double(lengths.back())) {
      lengths.back() = longest;
    }
    if (longest > lengths.back()) lengths.push_back(longest);
    // NOTE [ Rungs where the growth bends ]: the first kFirstRungs and the longest, then the
    // rest only where the growth slows between them.
    std::map<int64_t, double> measured;  // rung -> its residual
    const auto run = [&](int64_t n) { measured.emplace(n, residual(n, n)); };
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (i < kFirstRungs || i + 1 == lengths.size()) run(lengths[i]);
    }
    if (measured.size() < lengths.size()) {
      const auto last = std::prev(measured.end()), before = std::prev(last),
                 earlier = std::prev(before);
      const auto growth = [](auto from, auto to) {
        return (to->second - from->second) / double(to->first - from->first);
      };
      if (growth(before, last) < kSlowerGrowth * growth(earlier, before)) {
        for (const int64_t n : lengths) {
          if (measured.count(n) == 0) run(n);
        }
      }
    }
    std::vector<int64_t> rungs;
    std::vector<double> residuals;
    for (const auto& [n, r] : measured) {
      rungs.push_back(n);
      residuals.push_back(r);
    }
    fit_backward_transient(e, rungs, residuals,
                           double(std::max<int64_t>(0, e.f0 - parameter_bytes(workload))));
    e.later = int64_t(residual(2, 1));
  }
  if (T >= 2 * kFloorTapeSteps) {
    e.floor = int64_t(residual(2 * kFloorTapeSteps, kFloorTapeSteps));
  }
  return e;
}

// NOTE [ Variable lengths are measured on the batch ]: where sequences have ended, a step
// costs neither what a full step costs nor that scaled by the active fraction (the built-in
// modules run the running rows alone, the cells mask a full batch, a user's module does what
// it does). So those steps are measured on the batch itself, in profile blocks of
// kProfileBlock steps run as the executor runs a block (NOTE [ One block, measured ]), up to
// kProfiledSteps steps (a longer batch: as many, spread over it, its other steps priced
// through the active counts: NOTE [ Other batches of the workload ] in cost_model.cpp). A
// block's cost beyond the per-call cost is spread over its steps: evenly, or in proportion to
// the sequences running for a model that runs only those (NOTE [ Runs, measured ]).
// Measured: docs/methods.md, "Calibration, measured".
constexpr int64_t kProfileBlock = 32, kProfiledSteps = 512;

// Where the profile blocks start: every kProfileBlock steps up to kProfiledSteps steps,
// each from the last one's exit; on a longer batch, as many blocks spread evenly over it, each
// from h0 (what a step costs does not depend on the state's values).
std::vector<int64_t> profile_starts(int64_t T) {
  std::vector<int64_t> starts;
  if (T <= kProfiledSteps) {
    for (int64_t a = 0; a < T; a += kProfileBlock) starts.push_back(a);
    return starts;
  }
  const int64_t blocks = kProfiledSteps / kProfileBlock;
  for (int64_t i = 0; i < blocks; ++i) {
    starts.push_back(i * (T - kProfileBlock) / (blocks - 1));
  }
  return starts;
}

// A profile block [a, a + n) as run: run_block's costs, its exit state dropped.
struct ProfileRun {
  int64_t a = 0, n = 0;
  double advance_s = 0;
  int64_t advance_peak = 0;
  TapeRun taped;
};

std::vector<ProfileRun> run_profile(const Workload& workload) {
  const auto& x = workload.batch.inputs;  // [T, B, F]
  const int64_t T = workload.batch.time_steps();
  measure::DeviceTimer timer(x.device());
  std::vector<ProfileRun> runs;
  State entry = workload.h0.detached();
  const bool chained = T <= kProfiledSteps;
  for (const int64_t a : profile_starts(T)) {
    const int64_t n = std::min(kProfileBlock, T - a);
    auto inputs = x.narrow(0, a, n);  // [n, B, F]
    if (x.requires_grad()) inputs = inputs.detach().requires_grad_(true);
    const State& from = chained ? entry : workload.h0;
    BlockRun run = run_block(workload, inputs, a, n, from.detached(), timer);
    runs.push_back({a, n, run.advance_s, run.advance_peak, run.taped});
    entry = std::move(run.exit);
  }
  return runs;
}

// NOTE [ Runs, measured ]: whether the model reverses a tape in runs between ends (NOTE [
// Backward in runs ] in cost_model.h) is what its backward does, not what its code says: one
// tape of the batch from step 0 (min(T, kLongestMeasuredTape) steps, its lengths), reversed
// alone, and its backward peak against the model's prediction either way; the nearer one
// wins. A model that reverses in runs computes only the sequences running: its profile is
// spread by the active counts, and the head's per-step part is what makes that tape's
// backward exact. Exact on that tape, not beyond it; the planner's plan check holds the budget
// regardless (NOTE [ A budget is a promise ]). Measured: docs/methods.md, "Calibration,
// measured".
int64_t runs_tape_steps(const Workload& workload) {
  return std::min(workload.batch.time_steps(), kLongestMeasuredTape);
}

// That tape, where some sequence ends within it (`first_end`: the first step some sequence
// no longer has); none otherwise.
std::optional<TapeRun> run_runs_tape(const Workload& workload, int64_t first_end) {
  const int64_t L = runs_tape_steps(workload);
  if (first_end >= L) return std::nullopt;
  const auto& x = workload.batch.inputs;  // [T, B, F]
  measure::DeviceTimer timer(x.device());
  auto inputs = x.narrow(0, 0, L).detach();  // [L, B, F]
  if (x.requires_grad()) inputs.requires_grad_(true);
  return run_tape(workload, inputs, 0, L, workload.h0.detached(), timer);
}

// NOTE [ Calibration by lifetime ]: measure_cost_model runs every experiment first, in the
// order below (Measurements), then fills the cost model's groups (NOTE [ Cost model by
// lifetime ] in cost_model.h) from them, one function each: the call terms, the backward's
// reversal (how a tape is reversed), the step terms, the iteration's, and last the backward's
// per-call bytes. The backward comes in two because of what truly depends on what: the
// profile's steps are spread as the backward reverses them, F0 holds the one-step chain's
// transient, which the backward's per-call bytes take from it (NOTE [ What a call holds,
// whatever its length ]), and a run reversed after another holds the parameter gradients.
struct Measurements {
  PrefixFit prefix;  // fit_prefix: the fused path on the first n1 and n2 steps
  StateCost state;   // measure_state: a stored state
  // Bytes per step live for the whole step: per-step losses [T, B], and with dL/dx the
  // buffer [T, B, F] and x.grad.
  int64_t fixed_per_step = 0;
  EndToEnd end_to_end;               // calibrate_end_to_end: the executor's own peaks
  std::vector<int64_t> active;       // [T] active_sequences_of; empty without lengths
  int64_t first_end = 0;             // the first step some sequence no longer has (T: none)
  CallSeconds calls;                 // measure_call_seconds
  std::vector<ProfileRun> profile;   // with lengths: run_profile
  std::optional<TapeRun> runs_tape;  // with lengths: NOTE [ Runs, measured ]
};

Measurements run_experiments(const Workload& workload, const CostMeasureOptions& options) {
  const int64_t T = workload.batch.time_steps(), B = workload.batch.batch_size();
  const auto& x = workload.batch.inputs;  // [T, B, F]
  Measurements ms;
  ms.prefix = fit_prefix(workload, options);
  ms.state = measure_state(workload);
  ms.fixed_per_step = B * int64_t(x.element_size()) + (x.requires_grad() ? 2 * bytes_of(x) / T : 0);
  ms.end_to_end = calibrate_end_to_end(workload, ms.prefix, ms.fixed_per_step);
  ms.active = active_sequences_of(workload.batch);
  ms.first_end = workload.batch.has_lengths() ? workload.batch.lengths.min().item<int64_t>() : T;
  ms.calls = measure_call_seconds(workload, ms.prefix, ms.first_end, ms.active);
  if (workload.batch.has_lengths()) {
    ms.profile = run_profile(workload);
    ms.runs_tape = run_runs_tape(workload, ms.first_end);
  }
  return ms;
}

// Long tapes (cost_model.h): what tapes from step 0 take per step beyond the model's per-step
// and per-call seconds grows with the tape (call.tape_growth_seconds per step of it): the
// least-squares slope over the end-to-end ladder's full tapes of kShortGrowthTape steps or
// more (NOTE [ Calibrating the peak end to end ]), timed anyway, so no run more. A
// variable-length batch's tapes grow as fast or slower: the slope over full steps bounds them.
constexpr int64_t kShortGrowthTape = 64;  // the shortest tape fitted

double fit_tape_growth(double op_seconds, const EndToEnd& e, const PrefixFit& f) {
  LineFit line;
  for (const auto& [n, seconds] : e.full_tapes) {
    if (n < kShortGrowthTape) continue;
    // The ladder's tapes ran every sequence: the fused path's per-step and per-call costs.
    const double explained = 2 * op_seconds + (f.forward_grad_s + f.backward_s) * double(n);
    line.add(double(n), (seconds - explained) / double(n));
  }
  return std::max(0.0, line.slope());
}

// call.*: from the measurements alone.
void fill_call_terms(CostModel& m, const Measurements& ms) {
  const PrefixFit& f = ms.prefix;
  m.call.op_seconds = ms.calls.op;
  m.call.ended_seconds = ms.calls.ended;
  m.call.tape_growth_seconds = fit_tape_growth(m.call.op_seconds, ms.end_to_end, f);
  m.call.advance_op_bytes = std::max<int64_t>(0, std::llround(f.advance_op_b) - ms.state.exit);
  m.call.kept_tape_bytes = std::max<int64_t>(0, std::llround(f.tape_op_b) - ms.state.exit);
}

// What a profile block [a, a + n) costs in all, beyond the per-call costs.
struct ProfileBlock {
  int64_t a = 0, n = 0;
  double advance_s = 0, forward_grad_s = 0, backward_s = 0;
  double tape = 0, transient = 0, advance = 0;  // bytes
};

// Reads call.* and the active counts: a block's calls are priced by m.calls_seconds.
std::vector<ProfileBlock> profile_blocks(const CostModel& m, const Measurements& ms) {
  const PrefixFit& f = ms.prefix;
  const EndToEnd& e = ms.end_to_end;
  std::vector<ProfileBlock> blocks;
  for (const ProfileRun& run : ms.profile) {
    const int64_t a = run.a, n = run.n;
    const double fused_backward_peak = f.backward_peak_b * double(n) + f.backward_peak_op_b;
    const double call_s = m.calls_seconds(a, a + n, n);
    // Fewer sequences running need less than the fused path's transient: the excess may be
    // negative.
    const TapeRun& taped = run.taped;
    blocks.push_back(
        {a, n, run.advance_s - call_s, taped.forward_grad_s - call_s, taped.backward_s - call_s,
         double(taped.tape) - f.tape_op_b,
         e.backward_step * double(n) + double(taped.backward_peak) - fused_backward_peak,
         double(run.advance_peak - ms.state.exit - m.call.advance_op_bytes)});
  }
  return blocks;
}

// A model of the profile blocks' per-step costs (step.* but state_bytes) over the batch's
// steps, whose active counts are `active` [T], spread evenly or by the active counts: over the
// batch's steps where the blocks are all of them; else over the profiled steps, then priced
// for the batch through their active counts (NOTE [ Other batches of the workload ] in
// cost_model.cpp).
CostModel spread_profile(const std::vector<int64_t>& active,
                         const std::vector<ProfileBlock>& blocks, bool by_active) {
  CostModel p;
  for (const auto& block : blocks) {
    double running = 0;  // sequence-steps in the block
    for (int64_t t = block.a; t < block.a + block.n; ++t) running += double(active[size_t(t)]);
    // A block of padding alone (every sequence ended) is spread evenly.
    const bool weighted = by_active && running > 0;
    for (int64_t t = block.a; t < block.a + block.n; ++t) {
      const double share = weighted ? double(active[size_t(t)]) / running : 1.0 / double(block.n);
      const auto part = [&](double total) { return std::max(0.0, total) * share; };
      const auto even = [&](double total) { return std::max(0.0, total) / double(block.n); };
      p.step.forward_seconds.push_back(part(block.advance_s));
      p.step.forward_grad_seconds.push_back(part(block.forward_grad_s));
      p.step.backward_seconds.push_back(part(block.backward_s));
      p.step.tape_bytes.push_back(int64_t(part(block.tape)));
      p.step.backward_transient_bytes.push_back(int64_t(even(block.transient)));
      p.step.advance_transient_bytes.push_back(int64_t(part(block.advance)));
      p.active_sequences.push_back(active[size_t(t)]);
    }
  }
  p.step.state_bytes.assign(size_t(p.time_steps() + 1), 0);  // unread
  const int64_t T = int64_t(active.size());
  return p.time_steps() == T ? p : p.through_active_counts(T, active);
}

// Parameter gradients, out of F0: the iteration's, and what a run reversed after another
// holds (NOTE [ Runs, measured ]).
int64_t gradient_bytes_of(const Workload& workload, const EndToEnd& e) {
  return std::min(parameter_bytes(workload), e.f0);
}

// backward.window_*, splits_at_ends, head_step_bytes: how a tape is reversed. Reads call.*
// (profile_blocks); the runs are judged with the sums as the ladder measured them.
void fill_backward_reversal_terms(CostModel& m, const Workload& workload,
                                  const Measurements& ms) {
  const EndToEnd& e = ms.end_to_end;
  const PrefixFit& f = ms.prefix;
  m.backward.window_steps = e.backward_window;  // NOTE [ Backward windows ]
  m.backward.window_step_bytes = int64_t(e.window_step);
  if (!ms.runs_tape) return;  // NOTE [ Runs, measured ]: no end within its tape
  const int64_t L = runs_tape_steps(workload);
  const auto blocks = profile_blocks(m, ms);
  CostModel once = spread_profile(ms.active, blocks, false);  // one run per tape
  once.backward = m.backward;
  CostModel by_active = spread_profile(ms.active, blocks, true);
  by_active.backward = m.backward;
  by_active.backward.sums_bytes = std::max<int64_t>(0, std::llround(e.backward_call));
  by_active.iteration.gradient_bytes = gradient_bytes_of(workload, e);
  CostModel runs = by_active;
  runs.backward.splits_at_ends = true;
  // The head's output gradient leaves the steps' transients; a negative part (the head's
  // tape freed) was never in them.
  const auto head_apart = [&](int64_t head) {
    runs.backward.head_step_bytes = head;
    for (size_t t = 0; t < runs.step.backward_transient_bytes.size(); ++t) {
      runs.step.backward_transient_bytes[t] = std::max<int64_t>(
          0, by_active.step.backward_transient_bytes[t] - std::max<int64_t>(0, head));
    }
  };
  head_apart(int64_t(f.head_backward_peak_b));
  const TapeRun& run = *ms.runs_tape;
  const double needs = double(run.backward_peak) - f.backward_peak_op_b;
  const auto transient = [&](const CostModel& model) {
    return double(CostPrefix(model).tape_transient_b(0, L));
  };
  if (std::abs(needs - transient(runs)) >= std::abs(needs - transient(once))) return;
  head_apart(0);
  // What the spread profile's tape leaves out of that tape is live in its backward too.
  const double unpriced =
      double(run.tape) - f.tape_op_b - double(CostPrefix(runs).tape_b(0, L));
  m.backward.splits_at_ends = true;
  m.backward.head_step_bytes = int64_t((needs + unpriced - transient(runs)) / double(L));  // signed
}

// step.*. Fixed lengths: every step costs what the prefix fits say. With lengths: the profile
// (reads call.*), spread as the backward reverses it (reads backward.splits_at_ends), the
// head's output gradient apart where priced so (reads backward.head_step_bytes).
void fill_step_terms(CostModel& m, const Workload& workload, const Measurements& ms) {
  const PrefixFit& f = ms.prefix;
  const int64_t T = workload.batch.time_steps();
  if (workload.batch.has_lengths()) {
    const CostModel spread =
        spread_profile(ms.active, profile_blocks(m, ms), m.backward.splits_at_ends);
    m.step = spread.step;
    const int64_t head = std::max<int64_t>(0, m.backward.head_step_bytes);
    for (auto& transient : m.step.backward_transient_bytes) {
      transient = std::max<int64_t>(0, transient - head);
    }
  } else {
    m.step.forward_seconds.assign(size_t(T), f.advance_s);
    m.step.forward_grad_seconds.assign(size_t(T), f.forward_grad_s);
    m.step.backward_seconds.assign(size_t(T), f.backward_s);
    m.step.tape_bytes.assign(size_t(T), int64_t(f.tape_b));
    m.step.backward_transient_bytes.assign(size_t(T), int64_t(ms.end_to_end.backward_step));
    m.step.advance_transient_bytes.assign(size_t(T), int64_t(f.advance_b));
  }
  m.step.state_bytes.assign(size_t(T + 1), ms.state.stored);
  m.step.state_bytes[0] = 0;
}

// NOTE [ What a call holds, whatever its length ]: F0 is the peak of a one-step chain less its
// step's tape, so it holds that step's backward transient too, which the simulator charges
// again per step to every tape. Where a step's transient is large (2.x's oneDNN LSTM) short
// tapes then come out a step high. So the ladder's chord may go down to minus a step, and once
// the steps are known, the one-step chain's transient moves from F0 (the fixed and reversal
// bytes) to the per-call bytes. The same primitive holds per call what per-step kernels never
// did (weights reordered, a scratchpad): an advance's own bytes (call.advance_op_bytes), and
// what only reversing a tape holds, which an advance does not (iteration.reversal_bytes).
// Measured: docs/methods.md, "Calibration, measured".
// That transient, at most what F0 holds beyond the parameter gradients. Reads step.*,
// backward's reversal and iteration.gradient_bytes.
int64_t f0_step_transient(const CostModel& m, const EndToEnd& e) {
  return std::clamp<int64_t>(CostPrefix(m).tape_transient_b(0, 1), 0,
                             e.f0 - m.iteration.gradient_bytes);
}

// iteration.*: bytes live for the whole step besides what F0 holds, and the parameter
// gradients out of F0. F0's step of transient leaves (reads step.*, backward's reversal).
void fill_iteration_terms(CostModel& m, const Workload& workload, const Measurements& ms) {
  const EndToEnd& e = ms.end_to_end;
  m.iteration.gradient_bytes = gradient_bytes_of(workload, e);
  const int64_t transient = f0_step_transient(m, e);
  // The rest of F0 is the tape's and its backward's (NOTE [ What a call holds, whatever its
  // length ]).
  m.iteration.reversal_bytes = e.f0 - m.iteration.gradient_bytes - transient;
  // Per step: fixed_per_step, and with lengths the validated targets' copy [T, B, ...].
  const int64_t T = workload.batch.time_steps();
  const auto& targets = workload.batch.targets;  // [T, B, ...]
  m.iteration.fixed_step_bytes =
      ms.fixed_per_step + (workload.batch.has_lengths() ? bytes_of(targets) / T : 0);
  int64_t fixed = e.f0 - m.iteration.gradient_bytes + m.iteration.fixed_step_bytes * T;
  if (!workload.h0.requires_grad()) fixed += bytes_of(workload.h0);  // h0's zeros when absent
  // The calibration runs found the generator where the previous capture left it, so their
  // snapshots were shared; a step after other draws (new data, say) makes one anew.
  fixed += ms.state.snapshot;
  m.iteration.fixed_bytes = fixed - transient;
}

// backward.sums_bytes, later_bytes, floor_bytes: beyond the tape's transient, and F0's step of
// it that fill_iteration_terms took out (reads step.*, backward's reversal, iteration.*).
void fill_backward_call_terms(CostModel& m, const Measurements& ms) {
  const EndToEnd& e = ms.end_to_end;
  const int64_t one = CostPrefix(m).tape_transient_b(0, 1);
  const int64_t shift = f0_step_transient(m, e);
  m.backward.sums_bytes = std::max<int64_t>(0, std::llround(e.backward_call) + shift);
  m.backward.later_bytes = std::max<int64_t>(0, e.later + shift - one);
  // NOTE [ A later backward's floor ]: measured on [0, kFloorTapeSteps), beyond its transient
  // (none measured on a batch of fewer than twice its steps), which reads sums_bytes.
  m.backward.floor_bytes =
      m.time_steps() < 2 * kFloorTapeSteps
          ? 0
          : std::max<int64_t>(0, e.floor + shift - CostPrefix(m).tape_transient_b(0, kFloorTapeSteps));
}

}  // namespace

std::vector<int64_t> active_sequences_of(const SequenceBatch& batch) {
  if (!batch.has_lengths()) return {};
  const int64_t T = batch.time_steps();
  // ended[t]: how many sequences have exactly t steps, so none from step t on.
  const auto lengths = batch.lengths.to(torch::kCPU, torch::kLong).clamp(0, T);  // [B]
  const auto ended = torch::bincount(lengths, {}, T + 1).contiguous();         // [T + 1]
  std::vector<int64_t> active(static_cast<size_t>(T));
  int64_t running = batch.batch_size();
  for (int64_t t = 0; t < T; ++t) {
    running -= ended.data_ptr<int64_t>()[t];
    active[size_t(t)] = running;
  }
  return active;
}

SideEffectGuard::SideEffectGuard(const Workload& workload)
    : rng_(RngState::capture(workload.batch.inputs.device())) {
  std::vector<torch::Tensor> tensors;
  for (const auto& p : workload.model.parameters()) tensors.push_back(p);
  for (const auto& p : workload.head.parameters()) tensors.push_back(p);
  for (const auto& h : workload.h0) tensors.push_back(h);
  tensors.push_back(workload.batch.inputs);
  tensors.push_back(workload.batch.targets);  // NOTE [ Targets with a graph ]: a leaf
  for (const auto& t : tensors) {
    if (!t.defined() || !t.requires_grad() || !t.is_leaf()) continue;
    saved_.emplace_back(t, t.grad().defined() ? t.grad().clone() : torch::Tensor());
  }
}

SideEffectGuard::~SideEffectGuard() {
  for (auto& [tensor, grad] : saved_) tensor.mutable_grad() = grad;
  rng_.restore();
}

CostModel measure_cost_model(const Workload& workload, const CostMeasureOptions& options) {
  TORCH_CHECK(options.repeats >= 1, "cost measurement repeats: expected >= 1, got ",
              options.repeats);
  const SideEffectGuard guard(workload);
  // NOTE [ Calibration by lifetime ]: the experiments, then the groups filled from them.
  const Measurements ms = run_experiments(workload, options);
  CostModel m;
  m.active_sequences = ms.active;  // [T], empty without lengths
  fill_call_terms(m, ms);  // the measurements alone
  fill_backward_reversal_terms(m, workload, ms);  // reads call.*: the profile beyond its calls
  fill_step_terms(m, workload, ms);  // reads call.*, backward.splits_at_ends, head_step_bytes
  fill_iteration_terms(m, workload, ms);  // reads step.*, backward's reversal: F0's transient
  fill_backward_call_terms(m, ms);  // reads step.*, backward's reversal, iteration.*
  const PrefixFit& f = ms.prefix;
  m.source = fmt::format("measured on {} (n = {} and {} steps, {} repeats{})",
                         workload.batch.inputs.device().str(), f.n1, f.n2, options.repeats,
                         workload.batch.has_lengths() ? ", lengths profiled" : "");
  m.check();
  return m;
}

int64_t measured_iteration_peak(GradientMethod& method, const Workload& workload) {
  const SideEffectGuard guard(workload);
  Workload as_called = workload;
  const auto& x = workload.batch.inputs;  // [T, B, F]
  as_called.batch.inputs = x.detach().requires_grad_(x.requires_grad());
  std::vector<torch::Tensor> h0;
  for (const auto& h : workload.h0) h0.push_back(h.detach().requires_grad_(h.requires_grad()));
  as_called.h0 = workload.h0.requires_grad() ? State(std::move(h0)) : State();
  const auto device = workload.batch.inputs.device();
  return measure::measure_iteration(method, as_called, device).memory.iteration_peak_bytes +
         RngState::capture(device).bytes();
}

}  // namespace vlrnn::schedule
