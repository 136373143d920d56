// The in-block scan of a linear recurrence against the plain step loop (vlrnn/cells/
// linear_scan.h, linear_recurrence.h), float32, run as a scan and as a step loop, forward
// alone (no grad, as VLRNN's first pass runs it) and forward + backward (autograd; the
// scan's backward is its hand-written reverse scan), on two parts:
//   part:model       one block of a one-layer minGRU, F = H (its GEMMs included)
//   part:recurrence  the recurrence alone, h_t = a_t ⊙ h_{t-1} + b_t from given a, b
// Args: H (hidden), B (minibatch), T (steps in the block); phase: fwd or fwd_bwd.
// Counters: FLOP/s (useful FLOPs of the step loop: forward 2·B·2H·F + 7·B·H per step for
// the model, 2·B·H for the recurrence,
// backward 2x forward, vlrnn/measure/flops.h), util (of the peak GEMM rate measured at
// start-up), GFLOP, held_MB and peak_MB (resident memory grown; bench_util.h's RssProbe).
//
//   build/bench_linear_scan --benchmark_repetitions=5 --benchmark_min_time=0.01 \
//       --benchmark_enable_random_interleaving=true
//
// One LibTorch intra-op thread unless VLRNN_TORCH_THREADS says otherwise (main()).
//
// NOTE [ Fresh pages cost time ]
// The recurrence's buffers are 128 MiB each (T·B·H floats). glibc maps any buffer above
// 32 MiB fresh from the kernel and returns it on free, so every new one is page-faulted in
// and zeroed on first touch: on this project's 2-core VM, filling a fresh 128 MiB buffer took
// 57 ms against 16 ms for one touched before. The scan does two flops per element and streams
// about four such buffers forward + backward, so with glibc's defaults most of its time is
// that mapping; the step loop's time is mostly per-op overhead. An allocator that keeps freed
// memory (CUDA's caching allocator; on the CPU jemalloc, tcmalloc, or glibc's own tunables)
// removes it, so scripts/bench_linear_scan.sh measures both: as glibc ships, and with glibc
// keeping freed memory (VLRNN_BENCH_KEEP_FREED=1 turns off the resident-memory probe, whose
// malloc_trim would hand the memory back).

#include "bench_util.h"

#include "vlrnn/cells/min_rnn.h"

#include <string>

namespace {

using vlrnn::MinGru;
using vlrnn::RecurrenceForm;

// Shapes: T = steps in the block, B = minibatch, F = input features (= H), H = hidden.
double g_peak_flops_per_second = 0.0;

double flops_forward(int64_t hidden, int64_t batch, int64_t steps) {
  const double h = double(hidden);
  return double(batch) * double(steps) * (2.0 * 2.0 * h * h + 7.0 * h);
}

enum class Phase { kForward, kForwardBackward };
enum class Part { kModel, kRecurrence };

// The recurrence alone as a module: a, b [T, B, H] parameters (sigmoid-range decays), h0 zero.
struct Recurrence : torch::nn::Module {
  torch::Tensor a, b, h0;
  RecurrenceForm form;
  Recurrence(int64_t steps, int64_t batch, int64_t hidden, RecurrenceForm f) : form(f) {
    a = register_parameter("a", torch::sigmoid(torch::randn({steps, batch, hidden})));
    b = register_parameter("b", torch::randn({steps, batch, hidden}));
    h0 = torch::zeros({batch, hidden});
  }
  torch::Tensor forward() { return vlrnn::linear_recurrence(form, a, b, h0); }  // [T, B, H]
};

void BM_MinGru(benchmark::State& state, RecurrenceForm form, Phase phase, Part part) {
  const int64_t hidden = state.range(0), batch = state.range(1), steps = state.range(2);
  torch::manual_seed(1);
  MinGru model(hidden, hidden, 1, 0.0, form);
  Recurrence recurrence(part == Part::kRecurrence ? steps : 1, batch, hidden, form);
  const auto x = torch::randn({steps, batch, hidden});        // [T, B, F]
  const vlrnn::State h0{torch::zeros({1, batch, hidden})};  // [1, B, H]
  auto run_forward = [&] {
    return part == Part::kModel ? model.forward(x, h0).first : recurrence.forward();
  };
  double flops = part == Part::kModel ? flops_forward(hidden, batch, steps)
                                      : 2.0 * double(batch * hidden * steps);
  if (phase == Phase::kForward) {
    vlrnn::bench::RssProbe probe;
    double held = -1;  // -1: not measured (no counter)
    for (auto _ : state) {
      state.PauseTiming();
      probe.start();
      state.ResumeTiming();
      torch::NoGradGuard no_grad;
      auto z = run_forward();  // [T, B, H]
      benchmark::DoNotOptimize(z.data_ptr());
      state.PauseTiming();
      held = std::max(held, probe.peak_grown());
      state.ResumeTiming();
    }
    if (held >= 0) state.counters["peak_MB"] = held;
  } else {
    auto xg = x.clone().requires_grad_(true);
    const auto dz = torch::randn({steps, batch, hidden});  // [T, B, H]
    if (part == Part::kModel) {
      vlrnn::bench::run(state, model, xg, dz, [&] { return model.forward(xg, h0).first; });
    } else {
      vlrnn::bench::run(state, recurrence, xg, dz, run_forward);
    }
    flops *= 3.0;  // backward ≈ 2x forward (NOTE [ Backward = 2 x forward ])
  }
  vlrnn::bench::set_flop_counters(state, flops, steps, g_peak_flops_per_second);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "B", "T"})->Args({256, 32, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
}

// Names: BM_MinGru/<form>/phase:<phase>/part:<part>/H:../B:../T:..
#define VLRNN_LINEAR_BENCH(FORM, PHASE, PART, form_, phase_, part_)                          \
  BENCHMARK_CAPTURE(BM_MinGru, form_/phase:phase_/part:part_, RecurrenceForm::FORM,          \
                    Phase::PHASE, Part::PART)                                               \
      ->Apply(grid)
VLRNN_LINEAR_BENCH(kScan, kForward, kModel, scan, fwd, model);
VLRNN_LINEAR_BENCH(kLoop, kForward, kModel, loop, fwd, model);
VLRNN_LINEAR_BENCH(kScan, kForwardBackward, kModel, scan, fwd_bwd, model);
VLRNN_LINEAR_BENCH(kLoop, kForwardBackward, kModel, loop, fwd_bwd, model);
VLRNN_LINEAR_BENCH(kScan, kForward, kRecurrence, scan, fwd, recurrence);
VLRNN_LINEAR_BENCH(kLoop, kForward, kRecurrence, loop, fwd, recurrence);
VLRNN_LINEAR_BENCH(kScan, kForwardBackward, kRecurrence, scan, fwd_bwd, recurrence);
VLRNN_LINEAR_BENCH(kLoop, kForwardBackward, kRecurrence, loop, fwd_bwd, recurrence);

}  // namespace

int main(int argc, char** argv) {
  return vlrnn::bench::run_cell_benchmarks(argc, argv, g_peak_flops_per_second,
                                            {{"dtype", "float32"}});
}
