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

// NOTE [ What a call costs ]: a schedule of one-step blocks makes three calls per step (an
// advance, a tape, its backward), so its time is mostly per-call seconds. As the intercept
// of the line through n1 and n2 steps they swung tenfold between runs of one workload on a
// busy 2-core machine (1e-5 to 1e-4 s for an LSTM of H = 128, B = 16), and the predicted
// time of uniform(K=1) by 2x. Timing a one-step block alone fixed the swing but not the
// level: alone, a call costs more than among its kind in the executor. So the executor
// times n = kCallSteps steps as uniform(K=1) and as one tape: the same steps, taped and
// back-propagated once each, in 3n - 1 calls and in 2; the calls explain the difference
// beyond the advance's n - 1 steps.
// On a variable-length batch a block that reaches past the first end takes the model's
// lengths path, which costs more per call (the built-in modules select the running
// sequences' rows and put them back: NOTE [ Runs between ends ] in models.cpp; for an LSTM
// of H = 128, B = 16 about 5e-5 s beside a fused call's 9e-5 s; on LibTorch's packed path
// before them, a GRU's uniform(K=1) was under-predicted by 10-30 % without it), and more the
// more sequences are active (what it copies). So the same pair is timed on n steps past the
// first end, where as many sequences are active as on average past it: the first step
// of both runs is whole (the sub-batch's lengths are at least 1), so 3 fused calls and
// 3n - 6 past the first end make the difference. Medians of kCallRepeats.
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
  // step of transient (settle_per_call_bytes).
  int64_t later = 0;  // NOTE [ A later backward's bytes ]
  int64_t floor = 0;  // NOTE [ A later backward's floor ]
  // (n, seconds) of the ladder's full tapes: measure_tape_growth fits them.
  std::vector<std::pair<int64_t, double>> full_tapes;
};

// NOTE [ A transient that stops growing ]: most models' backward transient grows with the
// tape (autograd's per-step gradient buffers, a little faster than linearly), but a model
// that back-propagates a long tape in chunks (lstm_block: NOTE [ lstm_block backward in
// chunks ]) fills one chunk's buffer whatever the tape's length, beside what does grow with
// it (the head's output gradient, dL/dx). A chord between two short tapes, extrapolated, then
// over-predicts full BPTT's peak by half at T = 1024 (and percent=P lands well over P % of
// full's measured peak). So the residual r(n) is measured on full tapes of n = 8, 32, 128,
// 512 and 1024 steps (up to T; 512 only where the growth bends: NOTE [ Rungs where the
// growth bends ]). Where a segment grows by less than half the slope of the
// chord before it, the buffer is full: r(n) = call + grow · n + buffer · min(n, W) (NOTE [
// Backward windows ] in cost_model.h), with call + (grow + buffer) · n the chord up to the
// knee, grow the slope from the knee to the longest tape, and W what makes the longest tape's
// residual exact. That is exact where W is a rung of the ladder short of the longest
// (lstm_block's 2^20 / (H·B) steps is one for H·B = 2^11, 2^13, 2^15, 2^17: H = 128, B = 16
// among them). Where no segment stops growing, the chord from the shortest to the longest
// tape: it over-predicts tapes between them a little (safe) and under-predicts longer ones
// by a few percent (the planner's measured margin covers it: planner_method.cpp).
// A segment that grows by less than this fraction of the chord's slope has stopped growing.
constexpr double kStoppedGrowing = 0.5;

// `allowance`: what F0 holds beyond the parameter gradients, the most a negative intercept
// may take back from it (settle_per_call_bytes).
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
// for every kind measured but lstm_block: at F = 32, H = 128, B = 16 (tapes of 32, 128, 512 and
// 1024 steps), the growth per step from 128 to 512 steps and from 512 to 1024 equals the growth
// from 32 to 128, to the byte, for lstm, gru, rnn, gru_lstm, gru_v1, gru_v4, mingru and lru. A
// rung between the third (128 steps) and the longest then adds nothing the chord does not know,
// and its tape (512 steps) took a third of the ladder's time. So the first kFirstRungs rungs
// and the longest run first, and the rungs between only where the growth from the third to the
// longest is below kSlowerGrowth of the growth from the second to the third: lstm_block's 0.53
// (its buffer fills at 512 steps), or any knee up to about 900 steps of a 1024-step longest.
// There the whole ladder is fitted, as before.
constexpr size_t kFirstRungs = 3;
constexpr double kSlowerGrowth = 0.9;
// NOTE [ A later backward's bytes ]: a backward call after the first finds the parameter
// gradients there, so autograd computes the new ones in buffers and adds them in, where the
// first hands its buffers over as the gradients. A tape of two steps or more sums a weight's
// per-step gradients in buffers (backward_op_bytes, in every call), and those sums are what
// a later call adds in: so it needs about a gradient's worth beyond its transient whatever
// its length. Measured on 8 kinds (F = 32, H = 128, B = 16, T = 256), the sums plus what a
// later call of 16 steps needed beyond them came to what a later one-step call needs, within
// 12 % for the LibTorch modules (lstm: 196 K + 119 K against 297 K). So one term, measured on
// two one-step tapes (the second reversed first), prices a later call of any length, and one
// of two steps or more needs at least its sums (CostModel::backward_call_bytes). A second
// term measured on two tapes of 16 steps moved no prediction of the simulator's tests by more
// than 2.2 points when replaced so (lstm, 3 layers, lengths, K = 16: 1.5 % to 3.7 %), and
// kept the worst at 8.8 % (the small test, lengths, K = 8).
// NOTE [ A later backward's floor ]: a backward call after the first sums its weights'
// per-step gradients and adds the sum to the gradients, which exist by then: buffers as
// large as the weights, whatever the tape's length. Above a few steps what grows with the
// tape needs more (the per-call, later and transient bytes of NOTE [ Calibrating the
// peak end to end ], fitted on tapes of 8 steps or more); below, the buffers are the floor.
// Priced as a sum alone, uniform blocks of K = 2 to 8 were under-predicted by 6 to 9 % (LSTM
// and GRU, F = 32, H = 128, B = 16, T = 1000: a weight-sized buffer). The executor's own peak
// fixes it: two tapes of kFloorTapeSteps steps from step 0, every sequence running, the first
// reversed second; what the model so far leaves unexplained there, beyond that tape's
// transient, is the floor (settle_per_call_bytes). Beyond the transient, because on 2.x's oneDNN
// LSTM two steps of it are half the floor (350 of 700 KB at F = 32, H = 128, B = 16), and
// the tape's own steps, with fewer sequences running, need less: taken as a whole, the floor
// over-predicted blocks of K = 4 near the end of a batch of 1600 steps (one sequence left)
// by 5.6 % (Simulator.PricesALongVariableLengthBatchFromSpreadBlocks).

EndToEnd calibrate_end_to_end(const Workload& workload, const PrefixFit& f,
                              int64_t fixed_per_step) {
  const int64_t T = workload.batch.time_steps();
  EndToEnd e;
  // NOTE [ One tape's own bytes ]: F0 keeps what a tape holds whatever its length (its
  // loss, its exit state: the intercept of the tape's bytes, f.tape_op_b), so the model
  // charges it once, in the fixed bytes: a tape is alive at every backward, where the peaks
  // are. It was a term of its own, charged per tape, until zeroing it moved no prediction of
  // the simulator's tests by more than 0.7 points (scripts/cost_term_ablation.py, on 1.13);
  // charged so, the predictions moved by 0.034 % at most. On 2.x's oneDNN LSTM a tape's own
  // bytes are tens of KB (its workspace, rounded up to pages), and two places where the one
  // tape in F0 is not the right count are priced: an advance holds no tape being reversed
  // (reversal_bytes), a kept tape holds its own beside the one reversed (kept_tape_bytes).
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

// Fixed lengths: every step costs what the prefix fits say.
void fill_fixed_length_steps(CostModel& m, const PrefixFit& f, const EndToEnd& e, int64_t T) {
  m.forward_seconds.assign(size_t(T), f.advance_s);
  m.forward_grad_seconds.assign(size_t(T), f.forward_grad_s);
  m.backward_seconds.assign(size_t(T), f.backward_s);
  m.tape_bytes.assign(size_t(T), int64_t(f.tape_b));
  m.backward_transient_bytes.assign(size_t(T), int64_t(e.backward_step));
  m.advance_transient_bytes.assign(size_t(T), int64_t(f.advance_b));
}

// NOTE [ Variable lengths are measured on the batch ]: where sequences have ended, a step
// costs neither what a full step costs nor that scaled by the active fraction. The built-in
// LibTorch modules run the sequences still running alone (selecting their rows and putting
// them back: NOTE [ Runs between ends ] in models.cpp), the hand-written cells mask a full
// batch, a user's module does what it does. So the steps of a variable-length batch are not
// modelled: they are measured, on the batch itself, in profile blocks of kProfileBlock steps
// run as the executor runs a block (advance without grad; forward with grad from detached
// leaves; backward from both roots: NOTE [ One block, measured ]), each profile block once. A
// profile block's cost, less the per-call cost the prefix fits give, is spread over its
// steps; so is its backward peak beyond the fused path's, on top of the end-to-end per-step
// transient. Evenly, for a model that computes every sequence at every step; in proportion
// to the sequences running at each step for one that runs only those (NOTE [ Runs,
// measured ]), where a block holding an end would otherwise charge its steps before the end
// too little and those after it too much. One extra pass over the batch, about one gradient
// step, up to kProfiledSteps steps; a longer batch is profiled in as many steps, blocks
// spread evenly over it (profile_starts), and its steps priced from theirs through the active
// counts, as another batch of the workload is (NOTE [ Other batches of the workload ] in
// cost_model.cpp). So calibration stops growing with T there. A batch of 1600 steps priced so
// is held to the same 5 % in blocks of 16, 4 and 1 steps
// (Simulator.PricesALongVariableLengthBatchFromSpreadBlocks). kProfiledSteps was 1024, the
// longest tape, until 512 moved no prediction of the simulator's tests by more than 1.5
// points (gru_lstm, lengths, T = 1000, another batch priced, K = 16: +1.8 % to +3.3 %) and
// halved the pass at T = 1000.
constexpr int64_t kProfileBlock = 32, kProfiledSteps = 512;

// What a profile block [a, a + n) costs in all, beyond the per-call costs.
struct ProfileBlock {
  int64_t a = 0, n = 0;
  double advance_s = 0, forward_grad_s = 0, backward_s = 0;
  double tape = 0, transient = 0, advance = 0;  // bytes
};

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

std::vector<ProfileBlock> profile_blocks(const CostModel& m, const Workload& workload,
                                         const PrefixFit& f, const EndToEnd& e,
                                         int64_t state_bytes) {
  const auto& x = workload.batch.inputs;  // [T, B, F]
  const int64_t T = workload.batch.time_steps();
  measure::DeviceTimer timer(x.device());
  std::vector<ProfileBlock> blocks;
  State entry = workload.h0.detached();
  const bool chained = T <= kProfiledSteps;
  for (const int64_t a : profile_starts(T)) {
    const int64_t n = std::min(kProfileBlock, T - a);
    auto inputs = x.narrow(0, a, n);  // [n, B, F]
    if (x.requires_grad()) inputs = inputs.detach().requires_grad_(true);
    const State& from = chained ? entry : workload.h0;
    BlockRun run = run_block(workload, inputs, a, n, from.detached(), timer);
    const double fused_backward_peak = f.backward_peak_b * double(n) + f.backward_peak_op_b;
    const double call_s = m.calls_seconds(a, a + n, n);
    // Fewer sequences running need less than the fused path's transient: the excess may be
    // negative.
    const TapeRun& taped = run.taped;
    blocks.push_back({a, n, run.advance_s - call_s, taped.forward_grad_s - call_s,
                      taped.backward_s - call_s, double(taped.tape) - f.tape_op_b,
                      e.backward_step * double(n) + double(taped.backward_peak) - fused_backward_peak,
                      double(run.advance_peak - state_bytes - m.advance_op_bytes)});
    entry = std::move(run.exit);
  }
  return blocks;
}

// `m` with the per-step vectors of the profile blocks, spread evenly or by the active counts:
// over the batch's steps where the blocks are all of them; else over the profiled steps, then
// priced for the batch through their active counts (NOTE [ Other batches of the workload ] in
// cost_model.cpp).
CostModel spread_profile(const CostModel& m, const std::vector<ProfileBlock>& blocks,
                         bool by_active) {
  const auto& active = m.active_sequences;  // [T]
  CostModel p = m;
  p.forward_seconds.clear();
  p.forward_grad_seconds.clear();
  p.backward_seconds.clear();
  p.tape_bytes.clear();
  p.backward_transient_bytes.clear();
  p.advance_transient_bytes.clear();
  p.active_sequences.clear();
  for (const auto& block : blocks) {
    double running = 0;  // sequence-steps in the block
    for (int64_t t = block.a; t < block.a + block.n; ++t) running += double(active[size_t(t)]);
    // A block of padding alone (every sequence ended) is spread evenly.
    const bool weighted = by_active && running > 0;
    for (int64_t t = block.a; t < block.a + block.n; ++t) {
      const double share = weighted ? double(active[size_t(t)]) / running : 1.0 / double(block.n);
      const auto part = [&](double total) { return std::max(0.0, total) * share; };
      const auto even = [&](double total) { return std::max(0.0, total) / double(block.n); };
      p.forward_seconds.push_back(part(block.advance_s));
      p.forward_grad_seconds.push_back(part(block.forward_grad_s));
      p.backward_seconds.push_back(part(block.backward_s));
      p.tape_bytes.push_back(int64_t(part(block.tape)));
      p.backward_transient_bytes.push_back(int64_t(even(block.transient)));
      p.advance_transient_bytes.push_back(int64_t(part(block.advance)));
      p.active_sequences.push_back(active[size_t(t)]);
    }
  }
  const int64_t T = int64_t(active.size());
  if (p.time_steps() == T) return p;
  p.state_bytes.assign(size_t(p.time_steps() + 1), 0);  // unread: the caller's, below
  CostModel priced = p.through_active_counts(T, active);
  priced.state_bytes = m.state_bytes;
  priced.fixed_bytes = m.fixed_bytes;
  priced.source = m.source;
  return priced;
}

// NOTE [ Runs, measured ]: whether the model reverses a tape in runs between ends (NOTE [
// Backward in runs ] in cost_model.h) is what its backward does, not what its code says: one
// tape of the batch from step 0, min(T, kLongestMeasuredTape) steps and its lengths, reversed
// alone, and its backward peak against the model's prediction either way (in runs with the
// head's own backward peak per step apart); the nearer one. A model that reverses in runs
// computes only the sequences running: its profile is spread by the active counts (NOTE [
// Variable lengths are measured on the batch ]), and the head's part is then what makes that
// tape's backward exact (a model of two modules holds the lower one's output gradient for the
// whole tape too), the tape's bytes that the profile leaves out counted in: they are live in
// that backward. The one tape serves both, with no advance before it: full BPTT over the same
// steps in the executor, fitting the head as well, cost a quarter of a second more at T = 1000
// (LSTM, F = 32, H = 128, B = 16), and its peak misled the choice: it holds the tape's
// unpriced bytes too, which moved a GRU under an LSTM nearer the sum than the runs. The head's
// part is exact on that tape, not beyond: on a batch longer than kLongestMeasuredTape a long
// tape can be under-predicted (full BPTT by 8.6 % for the LSTM of
// Simulator.PricesALongVariableLengthBatchFromSpreadBlocks, T = 1600; the planner's plan
// check holds the budget regardless: NOTE [ A budget is a promise ]).
void measure_backward_runs(CostModel& m, const CostModel& by_active, const Workload& workload,
                           const PrefixFit& f) {
  const int64_t L = std::min(workload.batch.time_steps(), kLongestMeasuredTape);
  if (m.first_end() >= L) return;
  CostModel runs = by_active;
  runs.backward_splits_at_ends = 1;
  // The head's output gradient leaves the steps' transients; a negative part (the head's
  // tape freed) was never in them.
  const auto head_apart = [&](int64_t head) {
    runs.head_backward_step_bytes = head;
    for (size_t t = 0; t < runs.backward_transient_bytes.size(); ++t) {
      runs.backward_transient_bytes[t] = std::max<int64_t>(
          0, by_active.backward_transient_bytes[t] - std::max<int64_t>(0, head));
    }
  };
  head_apart(int64_t(f.head_backward_peak_b));
  const auto& x = workload.batch.inputs;  // [T, B, F]
  measure::DeviceTimer timer(x.device());
  auto inputs = x.narrow(0, 0, L).detach();  // [L, B, F]
  if (x.requires_grad()) inputs.requires_grad_(true);
  const TapeRun run = run_tape(workload, inputs, 0, L, workload.h0.detached(), timer);
  const double needs = double(run.backward_peak) - f.backward_peak_op_b;
  const auto transient = [&](const CostModel& model) {
    return double(CostPrefix(model).tape_transient_b(0, L));
  };
  if (std::abs(needs - transient(runs)) >= std::abs(needs - transient(m))) return;
  head_apart(0);
  // What the spread profile's tape leaves out of that tape is live in its backward too.
  const double unpriced =
      double(run.tape) - f.tape_op_b - double(CostPrefix(runs).tape_b(0, L));
  head_apart(int64_t((needs + unpriced - transient(runs)) / double(L)));  // signed
  m = std::move(runs);
}

// Long tapes (cost_model.h): what tapes from step 0 take per step beyond the model's per-step
// and per-call seconds grows with the tape (by tape_growth_seconds per step of it). The
// end-to-end ladder (NOTE [ Calibrating the peak end to end ]) has run full tapes of 128 and
// min(T, 1024) steps of this very batch (and of 512 where the growth bends), timed, every
// sequence running; the growth is the least-squares slope over those of kShortGrowthTape steps
// or more, at no run more. Over five calibrations of an LSTM (F = 32, H = 128, B = 16,
// T = 1000) it spread from 3.6e-8 to 5.8e-8 s, against 2.3e-8 to 5.1e-8 s for tapes of 64 and
// 1024 steps timed alternately three times, which took 0.9 s of a 1.5 s calibration. Without
// the 512-step tape, the slope over 128 and 1000 steps came within 10 % of the slope over all
// three in each of ten calibrations that fitted both, whose run-to-run spread on a busy day was
// far larger (-1.1e-7 to 1.5e-7 s). A variable-length batch's steps are the same model's, fewer
// sequences each, so its tapes grow as fast or slower: the slope over full steps is a bound.
constexpr int64_t kShortGrowthTape = 64;  // the shortest tape fitted

double fit_tape_growth(const CostModel& m, const EndToEnd& e, const PrefixFit& f) {
  LineFit line;
  for (const auto& [n, seconds] : e.full_tapes) {
    if (n < kShortGrowthTape) continue;
    // The ladder's tapes ran every sequence: the fused path's per-step and per-call costs.
    const double explained = 2 * m.op_seconds + (f.forward_grad_s + f.backward_s) * double(n);
    line.add(double(n), (seconds - explained) / double(n));
  }
  return std::max(0.0, line.slope());
}

// Bytes live for the whole step besides what F0 holds (cost_model.h's fixed_bytes), and
// the parameter gradients out of F0.
void fill_fixed_bytes(CostModel& m, const Workload& workload, const EndToEnd& e,
                      int64_t fixed_per_step, int64_t snapshot_bytes) {
  m.gradient_bytes = std::min(parameter_bytes(workload), e.f0);
  // The rest of F0 is the tape's and its backward's (NOTE [ What a call holds, whatever its
  // length ]).
  m.reversal_bytes = e.f0 - m.gradient_bytes;
  // Per step: fixed_per_step, and with lengths the validated targets' copy [T, B, ...].
  const int64_t T = workload.batch.time_steps();
  m.fixed_step_bytes =
      fixed_per_step + (workload.batch.has_lengths() ? bytes_of(workload.batch.targets) / T : 0);
  int64_t fixed = e.f0 - m.gradient_bytes + m.fixed_step_bytes * T;
  if (!workload.h0.requires_grad()) fixed += bytes_of(workload.h0);  // h0's zeros when absent
  // The calibration runs found the generator where the previous capture left it, so their
  // snapshots were shared; a step after other draws (new data, say) makes one anew.
  fixed += snapshot_bytes;
  m.fixed_bytes = fixed;
}

// NOTE [ What a call holds, whatever its length ]: F0 is the peak of a one-step chain less
// its step's tape, so it holds that step's backward transient too, which the simulator
// charges again, per step, to every tape; the per-call bytes fitted beyond F0 (the ladder's
// chord, the later backward's) come out lower by as much. That cost nothing where a step's
// transient is small beside the rest. On PyTorch 2.x's oneDNN LSTM (float32 on the CPU) it
// is not: the primitive's backward needs a scratchpad and weight-shaped buffers whose size
// grows by 178 KB per step, beside a tape of 165 KB per step (F = 32, H = 128, B = 16;
// 1.13's needs 28-32 KB). The chord's intercept came out at minus a step (the one-step
// chain's step, in F0), was clamped to a line through 0, and every short tape was
// over-predicted by about a step: +5.3 % at K = 4 (Simulator.PredictsVariableLengthPeaksAt
// ARealSize). So the chord may go down to minus its slope, and once the model's steps are
// known, the model's own charge for the one-step chain's tape leaves F0 (the fixed and
// tape-own bytes) for the per-call bytes: a tape of two steps or more is charged as before,
// a one-step tape and a later call no longer twice.
// The same primitive holds, whatever a call's length, what 1.13's per-step kernels never
// did: its weights reordered (F = 8, H = 32: 4 and 16 KB) and a scratchpad's own part in an
// advance, 61 KB in all there and 613 KB at H = 128, which the advance's line through n1
// and n2 steps dropped as its intercept (advance_op_bytes now), and the backward's buffers,
// which F0 holds for every op, the advances included (reversal_bytes: an advance while no
// tape lives holds none of it). Where an advance was the peak (revolve(s=4) on the small test
// of Simulator.PredictsTheMeasuredStepPeakWithinTenPercent) the two missed by +20 % on 2.6
// and by +3.2 % on 1.13.
void settle_per_call_bytes(CostModel& m, const EndToEnd& e) {
  const int64_t one = CostPrefix(m).tape_transient_b(0, 1);
  const int64_t shift = std::clamp<int64_t>(one, 0, m.reversal_bytes);
  m.fixed_bytes -= shift;
  m.reversal_bytes -= shift;
  m.backward_op_bytes = std::max<int64_t>(0, std::llround(e.backward_call) + shift);
  m.later_backward_bytes = std::max<int64_t>(0, e.later + shift - one);
  // NOTE [ A later backward's floor ]: measured on [0, kFloorTapeSteps), beyond its transient
  // (none measured on a batch of fewer than twice its steps).
  m.backward_floor_bytes =
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
  const int64_t T = workload.batch.time_steps(), B = workload.batch.batch_size();
  const auto& x = workload.batch.inputs;  // [T, B, F]
  const PrefixFit f = fit_prefix(workload, options);
  const StateCost state = measure_state(workload);
  // Bytes per step live for the whole step: per-step losses [T, B], and with dL/dx the
  // buffer [T, B, F] and x.grad.
  const int64_t fixed_per_step =
      B * int64_t(x.element_size()) + (x.requires_grad() ? 2 * bytes_of(x) / T : 0);
  const EndToEnd e = calibrate_end_to_end(workload, f, fixed_per_step);

  CostModel m;
  const auto active = active_sequences_of(workload.batch);  // [T], empty without lengths
  // The first end: the first step some sequence no longer has.
  const int64_t first_end =
      workload.batch.has_lengths() ? workload.batch.lengths.min().item<int64_t>() : T;
  const CallSeconds calls = measure_call_seconds(workload, f, first_end, active);
  m.op_seconds = calls.op;
  m.ended_call_seconds = calls.ended;
  // Until settle_per_call_bytes: as if F0 held no step of transient.
  m.backward_op_bytes = std::max<int64_t>(0, std::llround(e.backward_call));
  m.later_backward_bytes = std::max<int64_t>(0, e.later);
  m.backward_floor_bytes = std::max<int64_t>(0, e.floor);
  m.backward_window_steps = e.backward_window;  // NOTE [ Backward windows ]
  m.window_step_bytes = int64_t(e.window_step);
  m.advance_op_bytes = std::max<int64_t>(0, std::llround(f.advance_op_b) - state.exit);
  m.kept_tape_bytes = std::max<int64_t>(0, std::llround(f.tape_op_b) - state.exit);
  fill_fixed_bytes(m, workload, e, fixed_per_step, state.snapshot);
  if (workload.batch.has_lengths()) {
    // First: calls_seconds prices calls past the first end from the active counts.
    m.active_sequences = active;
    const auto blocks = profile_blocks(m, workload, f, e, state.exit);
    const CostModel by_active = spread_profile(m, blocks, true);
    m = spread_profile(m, blocks, false);
    measure_backward_runs(m, by_active, workload, f);
  } else {
    fill_fixed_length_steps(m, f, e, T);
  }
  settle_per_call_bytes(m, e);
  m.tape_growth_seconds = fit_tape_growth(m, e, f);
  m.state_bytes.assign(size_t(T + 1), state.stored);
  m.state_bytes[0] = 0;
  m.source = fmt::format("measured on {} (n = {} and {} steps, {} repeats{})",
                         x.device().str(), f.n1, f.n2, options.repeats,
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
