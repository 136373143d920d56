#pragma once
// What the Google Benchmark programs of experiments/ share: timing one forward + backward of
// a block with its memory probed around it (bench_gru_variants, bench_lstm_block).
// Shapes: T = steps in the block, B = minibatch, F = input features, H = hidden.

#include <benchmark/benchmark.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <torch/torch.h>
#include <torch/version.h>

#include "vlrnn/measure/peak_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace vlrnn::bench {

// Resident memory, in MB, read from /proc/self/status; NOTE [ Why RSS ]: the engine's exact
// tracking allocator lives elsewhere; here the kernel's counters suffice because the block
// buffers (hundreds of MB) are mapped fresh by malloc and returned on free. Each measurement
// first hands glibc's free memory back (malloc_trim) and resets the high-water mark
// (clear_refs = 5), so VmHWM - VmRSS(start) is the peak footprint of what one iteration
// allocated. -1 where /proc is missing.
// VLRNN_BENCH_KEEP_FREED=1 measures nothing (-1) and hands nothing back: with an allocator
// that keeps freed memory (NOTE [ Fresh pages cost time ]), the timed code then reuses pages
// it has touched before, as a training loop does.
class RssProbe {
 public:
  void start() {
    if (keep_freed_) return;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    std::ofstream("/proc/self/clear_refs") << "5";
    start_ = read("VmRSS:");
  }
  double grown() const { return delta(read("VmRSS:")); }       // now, over start()
  double peak_grown() const { return delta(read("VmHWM:")); }  // peak since start()

 private:
  double delta(double now) const { return now < 0 || start_ < 0 ? -1.0 : now - start_; }
  static bool keeps_freed() {
    const char* value = std::getenv("VLRNN_BENCH_KEEP_FREED");
    return value != nullptr && std::string(value) == "1";
  }
  const bool keep_freed_ = keeps_freed();
  static double read(const std::string& key) {
    std::ifstream status("/proc/self/status");
    std::string word;
    while (status >> word) {
      if (word == key) {
        double kb = 0;
        status >> kb;
        return kb / 1024.0;
      }
    }
    return -1.0;
  }
  double start_ = -1.0;
};

inline void clear_grads(torch::nn::Module& module, torch::Tensor& x) {
  for (auto& p : module.parameters()) p.mutable_grad().reset();
  x.mutable_grad().reset();
}

// Times `forward` (returns z [T, B, H]) + backward from dz [T, B, H]; memory probed untimed
// around them; x [T, B, F] and the module's gradients are cleared, untimed, before each.
template <typename Forward>
void run(benchmark::State& state, torch::nn::Module& module, torch::Tensor& x,
         const torch::Tensor& dz, Forward&& forward) {
  RssProbe probe;
  double held = -1, peak = -1;  // -1: not measured (no counters)
  for (auto _ : state) {
    state.PauseTiming();
    clear_grads(module, x);
    probe.start();
    state.ResumeTiming();
    auto z = forward();
    state.PauseTiming();
    held = std::max(held, probe.grown());
    state.ResumeTiming();
    torch::autograd::backward({z}, {dz});
    state.PauseTiming();
    peak = std::max(peak, probe.peak_grown());
    state.ResumeTiming();
  }
  if (peak >= 0) {
    state.counters["held_MB"] = held;
    state.counters["peak_MB"] = peak;
  }
}

// The counters every block benchmark reports for a forward + backward of `flops` useful
// FLOPs over `steps` time steps: the rate, and (when peak_flops_per_second > 0) the
// utilization of the measured peak GEMM rate.
inline void set_flop_counters(benchmark::State& state, double flops, int64_t steps,
                              double peak_flops_per_second = 0.0) {
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (peak_flops_per_second > 0) {
    state.counters["util"] = benchmark::Counter(flops / peak_flops_per_second,
                                                benchmark::Counter::kIsIterationInvariantRate);
  }
  state.counters["GFLOP"] = flops / 1e9;
  state.counters["T"] = static_cast<double>(steps);
}

// The main() of a cell benchmark that reports utilization (bench_lstm_block,
// bench_linear_scan): NOTE [ Thread policy ] (vlrnn/measure/threads.h), one LibTorch
// intra-op thread beside OpenBLAS's own (VLRNN_TORCH_THREADS overrides it); the peak GEMM
// rate measured into `peak_flops_per_second` before any benchmark runs; LibTorch's version,
// the thread count, `context` and the peak recorded in the JSON's context. Returns main's
// exit code (1 on an argument Google Benchmark does not know).
inline int run_cell_benchmarks(int argc, char** argv, double& peak_flops_per_second,
                               const std::vector<std::pair<std::string, std::string>>& context) {
  const char* threads = std::getenv("VLRNN_TORCH_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : 1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto peak = vlrnn::measure::measure_peak_gemm(torch::kCPU, torch::kFloat32, 1024, 10, 2);
  peak_flops_per_second = peak.flops_per_second;
  benchmark::AddCustomContext("libtorch", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
  benchmark::AddCustomContext("peak_gemm_flops_per_s", std::to_string(peak.flops_per_second));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace vlrnn::bench
