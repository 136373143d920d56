// The in-block scan of a linear recurrence against the plain step loop (vlrnn/cells/
// linear_scan.h, linear_recurrence.h): one block of a one-layer minGRU, float32, F = H,
// run as a scan and as a step loop, forward alone (no grad, as VLRNN's first pass runs it)
// and forward + backward (autograd; the scan's backward is its hand-written reverse scan).
// Args: H (hidden), B (minibatch), T (steps in the block); phase: fwd or fwd_bwd.
// Counters: FLOP/s (useful FLOPs of the step loop: forward 2·B·2H·F + 7·B·H per step,
// backward 2x forward, vlrnn/measure/flops.h), util (of the peak GEMM rate measured at
// start-up), GFLOP, held_MB and peak_MB (resident memory grown; bench_util.h's RssProbe).
//
//   build/bench_linear_scan --benchmark_repetitions=5 --benchmark_min_time=0.01 \
//       --benchmark_enable_random_interleaving=true
//
// One LibTorch intra-op thread unless VLRNN_TORCH_THREADS says otherwise (main()).

#include "bench_util.h"

#include "vlrnn/cells/min_rnn.h"
#include "vlrnn/measure/peak_gemm.h"

#include <torch/version.h>

#include <cstdlib>
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

void BM_MinGru(benchmark::State& state, RecurrenceForm form, Phase phase) {
  const int64_t hidden = state.range(0), batch = state.range(1), steps = state.range(2);
  torch::manual_seed(1);
  MinGru model(hidden, hidden, 1, 0.0, form);
  const auto x = torch::randn({steps, batch, hidden});        // [T, B, F]
  const vlrnn::State h0{torch::zeros({1, batch, hidden})};  // [1, B, H]
  double flops = flops_forward(hidden, batch, steps);
  if (phase == Phase::kForward) {
    vlrnn::bench::RssProbe probe;
    double held = 0;
    for (auto _ : state) {
      state.PauseTiming();
      probe.start();
      state.ResumeTiming();
      torch::NoGradGuard no_grad;
      auto z = model.forward(x, h0).first;  // [T, B, H]
      benchmark::DoNotOptimize(z.data_ptr());
      state.PauseTiming();
      held = std::max(held, probe.peak_grown());
      state.ResumeTiming();
    }
    state.counters["peak_MB"] = held;
  } else {
    auto xg = x.clone().requires_grad_(true);
    const auto dz = torch::randn({steps, batch, hidden});  // [T, B, H]
    vlrnn::bench::run(state, model, xg, dz, [&] { return model.forward(xg, h0).first; });
    flops *= 3.0;  // backward ≈ 2x forward (NOTE [ Backward = 2 x forward ])
  }
  vlrnn::bench::set_flop_counters(state, flops, steps, g_peak_flops_per_second);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "B", "T"})->Args({256, 32, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MinGru, scan/phase:fwd, RecurrenceForm::kScan, Phase::kForward)->Apply(grid);
BENCHMARK_CAPTURE(BM_MinGru, loop/phase:fwd, RecurrenceForm::kLoop, Phase::kForward)->Apply(grid);
BENCHMARK_CAPTURE(BM_MinGru, scan/phase:fwd_bwd, RecurrenceForm::kScan, Phase::kForwardBackward)
    ->Apply(grid);
BENCHMARK_CAPTURE(BM_MinGru, loop/phase:fwd_bwd, RecurrenceForm::kLoop, Phase::kForwardBackward)
    ->Apply(grid);

}  // namespace

int main(int argc, char** argv) {
  // One LibTorch intra-op thread beside OpenBLAS's own (the policy of every benchmark
  // here); VLRNN_TORCH_THREADS overrides it. Both counts are recorded.
  const char* threads = std::getenv("VLRNN_TORCH_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : 1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto peak = vlrnn::measure::measure_peak_gemm(torch::kCPU, torch::kFloat32, 1024, 10, 2);
  g_peak_flops_per_second = peak.flops_per_second;
  benchmark::AddCustomContext("libtorch", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
  benchmark::AddCustomContext("dtype", "float32");
  benchmark::AddCustomContext("peak_gemm_flops_per_s", std::to_string(peak.flops_per_second));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
