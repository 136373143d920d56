// Forward + backward time of one block of T = 256 steps for the four GRU variants with a
// hand-written block backward (vlrnn/cells/gru_block.h), LibTorch's fused torch::nn::GRU,
// and a per-step autograd loop over torch::nn::GRUCell; float32, F = H.
// Args: H (hidden) and B (minibatch). Counters: FLOP/s (useful FLOPs from the GEMM shapes:
// forward 2·B·(F·3H + H·3H) per step, backward 2x forward), GFLOP (per forward + backward),
// held_MB (resident memory grown by the forward: what is kept for backward, plus z) and
// peak_MB (the most resident memory grown during forward + backward), both from Linux's
// VmRSS / VmHWM with glibc's free memory returned first (RssProbe below).
//
//   build/bench_gru_variants --benchmark_filter='/H:1024/B:128/' --benchmark_repetitions=3 \
//       --benchmark_min_time=0.01 --benchmark_report_aggregates_only=true
//
// Every implementation gets the same work: x [T, B, F] requires grad (as a stacked layer's
// input would), h_0 is zeros without grad, the seed δz [T, B, H] is fixed, and the gradients
// are cleared between iterations, untimed (LibTorch then hands them over without an extra add).

#include "bench_util.h"

#include "vlrnn/cells/gru_block.h"

#include <torch/version.h>

#include <string>

namespace {

using vlrnn::GruBlock;
using vlrnn::GruVariant;
using vlrnn::bench::run;

// Shapes: T = steps in the block, B = minibatch, F = input features (= H), H = hidden.
constexpr int64_t kSteps = 256;  // T

double flops_forward_backward(int64_t hidden, int64_t batch) {
  const double input = static_cast<double>(hidden);  // F = H
  const double forward = 2.0 * batch * (input * 3 * hidden + hidden * 3.0 * hidden) * kSteps;
  return 3.0 * forward;  // backward ≈ 2x forward (δh and δx GEMMs + weight-gradient GEMMs)
}

struct Inputs {
  torch::Tensor x;   // [T, B, F] requires grad
  torch::Tensor h0;  // [1, B, H] zeros
  torch::Tensor dz;  // [T, B, H] the seed of backward

  Inputs(int64_t hidden, int64_t batch) {
    torch::manual_seed(0);
    x = torch::randn({kSteps, batch, hidden}).requires_grad_(true);
    h0 = torch::zeros({1, batch, hidden});
    dz = torch::randn({kSteps, batch, hidden});
  }
};

void set_counters(benchmark::State& state, int64_t hidden, int64_t batch) {
  vlrnn::bench::set_flop_counters(state, flops_forward_backward(hidden, batch), kSteps);
}

void BM_BlockGru(benchmark::State& state, GruVariant variant) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  GruBlock model(variant, hidden, hidden);
  Inputs in(hidden, batch);
  run(state, model, in.x, in.dz, [&] { return model.forward(in.x, vlrnn::State{in.h0}).first; });
  set_counters(state, hidden, batch);
}

void BM_TorchGru(benchmark::State& state) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  torch::nn::GRU gru(torch::nn::GRUOptions(hidden, hidden));
  Inputs in(hidden, batch);
  run(state, *gru, in.x, in.dz, [&] { return std::get<0>(gru->forward(in.x, in.h0)); });
  set_counters(state, hidden, batch);
}

void BM_TorchGruCellLoop(benchmark::State& state) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  torch::nn::GRUCell cell(torch::nn::GRUCellOptions(hidden, hidden));
  Inputs in(hidden, batch);
  run(state, *cell, in.x, in.dz, [&] {
    auto h = in.h0[0];  // [B, H]
    std::vector<torch::Tensor> z;
    z.reserve(kSteps);
    for (int64_t t = 0; t < kSteps; ++t) {
      h = cell->forward(in.x[t], h);
      z.push_back(h);
    }
    return torch::stack(z);  // [T, B, H]
  });
  set_counters(state, hidden, batch);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "B"})
      ->ArgsProduct({{512, 1024, 2048}, {32, 64, 128}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();  // BLAS runs on several threads: wall-clock time is what counts
}

BENCHMARK_CAPTURE(BM_BlockGru, v1, GruVariant::kV1)->Apply(grid);
BENCHMARK_CAPTURE(BM_BlockGru, v2, GruVariant::kV2)->Apply(grid);
BENCHMARK_CAPTURE(BM_BlockGru, v3, GruVariant::kV3)->Apply(grid);
BENCHMARK_CAPTURE(BM_BlockGru, v4, GruVariant::kV4)->Apply(grid);
BENCHMARK(BM_TorchGru)->Apply(grid);
BENCHMARK(BM_TorchGruCellLoop)->Apply(grid);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("libtorch", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
  benchmark::AddCustomContext("steps", std::to_string(kSteps));
  benchmark::AddCustomContext("dtype", "float32");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
