// Google Benchmark of every gradient method in the registry on an LSTM (F = 32, H = 128,
// C = 16), arguments {T, B, K}. Counters: items/s = sequences per second, steps/s = (step,
// sequence) pairs per second, GFLOP = useful GFLOPs (vlrnn/measure/flops.h), shown per second,
// iteration_peak_bytes = exact tensor bytes of one step above parameters + data.
//
//   build/bench_methods [--benchmark_filter=vlrnn] [--benchmark_format=json]
//   VLRNN_BENCH_DEVICE=cuda build/bench_methods     (CUDA builds: manual time, CUDA events)
//
// K is given to a method through its block option (vlrnn: block_length=K, checkpoint:
// segments=ceil(T/K), tbptt: k=K); a method with no such option runs with its defaults and
// K = 0. Methods come from the registry, so new ones are benchmarked with no edit here.

#include "lib/method_specs.h"
#include "lib/problem.h"

#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/measure/timer.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>

namespace {

using namespace vlrnn;

// How K reaches a method that takes a block length, by name (as block_options in configs).
const std::map<std::string, std::string> kBlockTemplates = {
    {"vlrnn", "block_length={K}"}, {"checkpoint", "segments={N}"}, {"tbptt", "k={K}"}};

torch::Device bench_device() {
  const char* name = std::getenv("VLRNN_BENCH_DEVICE");
  return experiments::parse_device(name ? name : "cpu");
}

// The spec to run `method` with block length `k`, or the bare name when it takes none.
std::string spec_for(const std::string& method, int64_t k, int64_t steps) {
  const auto it = kBlockTemplates.find(method);
  if (it == kBlockTemplates.end() || k == 0) return method;
  const auto spec = experiments::substitute_block(method + ":" + it->second, k, steps);
  try {
    make_method_from_spec(spec);
    return spec;
  } catch (const std::exception&) {
    return method;  // the template no longer matches the method's options: use defaults
  }
}

void run(benchmark::State& state, const std::string& method) {
  const int64_t steps = state.range(0), batch = state.range(1), k = state.range(2);
  experiments::ProblemSpec spec;
  spec.input_size = 32;
  spec.hidden_size = 128;
  spec.time_steps = steps;
  spec.batch = batch;
  spec.device = bench_device();
  const auto problem = experiments::make_problem(spec);
  const auto workload = problem.workload();
  auto gradient_method = make_method_from_spec(spec_for(method, k, steps));
  state.SetLabel(gradient_method->describe());

  // One untimed step for the memory counter and the FLOP counters.
  const auto first = measure::measure_iteration(*gradient_method, workload, spec.device);
  measure::DeviceTimer timer(spec.device);
  for (auto _ : state) {
    state.PauseTiming();
    measure::clear_gradients(workload);
    state.ResumeTiming();
    timer.start();
    benchmark::DoNotOptimize(gradient_method->compute(workload));
    const double seconds = timer.stop();
    if (spec.device.is_cuda()) state.SetIterationTime(seconds);
  }
  const auto flops = measure::iteration_flops(problem.flops, steps, batch, steps * batch, first.counters);
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["steps/s"] = benchmark::Counter(double(steps * batch),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP"] = benchmark::Counter(flops.useful() * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["iteration_peak_bytes"] = double(first.memory.iteration_peak_bytes);
  state.counters["recompute"] = flops.overhead();
}

}  // namespace

int main(int argc, char** argv) {
  const bool gpu = bench_device().is_cuda();
  for (const auto& method : vlrnn::method_names()) {
    if (!vlrnn::handles_left_to_right(method)) continue;  // bivlrnn: bidirectional models only
    auto* bench = benchmark::RegisterBenchmark(("method/" + method).c_str(),
                                               [method](benchmark::State& s) { run(s, method); });
    bench->ArgNames({"T", "B", "K"})->Unit(benchmark::kMillisecond);
    const bool takes_k = kBlockTemplates.count(method) > 0;
    for (int64_t steps : {1024, 4096}) {
      if (!takes_k) bench->Args({steps, 16, 0});
      else for (int64_t k : {32, 128}) bench->Args({steps, 16, k});
    }
    if (gpu) bench->UseManualTime(); else bench->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
