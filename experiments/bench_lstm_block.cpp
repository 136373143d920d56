// Forward + backward time of one block of T = 256 steps for lstm_block (the LSTM with a
// hand-written block backward, vlrnn/cells/lstm_block.h; saving gates or pre-activations),
// LibTorch's fused torch::nn::LSTM, and a per-step autograd loop over torch::nn::LSTMCell;
// float32, one layer, F = H.
// Args: H (hidden) and B (minibatch). Counters: FLOP/s (useful FLOPs from the GEMM shapes:
// forward 2·B·4H·(F + H) per step, backward 2x forward), util (FLOP/s over the peak GEMM
// rate measured at start-up: a 1024² float32 GEMM, median of 10), GFLOP (per forward +
// backward), held_MB and peak_MB (resident memory grown by forward, and at most during
// forward + backward; bench_util.h's RssProbe).
//
//   build/bench_lstm_block --benchmark_filter='/H:1024/B:32/' --benchmark_repetitions=3 \
//       --benchmark_min_time=0.01 --benchmark_report_aggregates_only=true
//
// Runs with one LibTorch intra-op thread unless VLRNN_TORCH_THREADS says otherwise (main()).
// Every implementation gets the same work: x [T, B, F] requires grad (as a stacked layer's
// input would), (h_0, c_0) are zeros without grad, the seed δz [T, B, H] is fixed, and the
// gradients are cleared between iterations, untimed.

#include "bench_util.h"

#include "vlrnn/cells/lstm_block.h"

#include <string>

namespace {

using vlrnn::LstmBlock;
using vlrnn::LstmSave;
using vlrnn::bench::run;

// Shapes: T = steps in the block, B = minibatch, F = input features (= H), H = hidden.
constexpr int64_t kSteps = 256;  // T
double g_peak_flops_per_second = 0.0;

double flops_forward_backward(int64_t hidden, int64_t batch) {
  const double input = static_cast<double>(hidden);  // F = H
  const double forward = 2.0 * batch * 4.0 * hidden * (input + hidden) * kSteps;
  return 3.0 * forward;  // backward ≈ 2x forward (δh and δx GEMMs + weight-gradient GEMMs)
}

struct Inputs {
  torch::Tensor x;       // [T, B, F] requires grad
  torch::Tensor h0, c0;  // [1, B, H] zeros
  torch::Tensor dz;      // [T, B, H] the seed of backward

  Inputs(int64_t hidden, int64_t batch) {
    torch::manual_seed(0);
    x = torch::randn({kSteps, batch, hidden}).requires_grad_(true);
    h0 = torch::zeros({1, batch, hidden});
    c0 = torch::zeros({1, batch, hidden});
    dz = torch::randn({kSteps, batch, hidden});
  }
};

void set_counters(benchmark::State& state, int64_t hidden, int64_t batch) {
  vlrnn::bench::set_flop_counters(state, flops_forward_backward(hidden, batch), kSteps,
                                  g_peak_flops_per_second);
}

void BM_LstmBlock(benchmark::State& state, LstmSave save) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  LstmBlock model(hidden, hidden, 1, 0.0, save);
  Inputs in(hidden, batch);
  run(state, model, in.x, in.dz,
      [&] { return model.forward(in.x, vlrnn::State{in.h0, in.c0}).first; });
  set_counters(state, hidden, batch);
}

void BM_TorchLstm(benchmark::State& state) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(hidden, hidden));
  Inputs in(hidden, batch);
  run(state, *lstm, in.x, in.dz,
      [&] { return std::get<0>(lstm->forward(in.x, std::make_tuple(in.h0, in.c0))); });
  set_counters(state, hidden, batch);
}

void BM_TorchLstmCellLoop(benchmark::State& state) {
  const int64_t hidden = state.range(0), batch = state.range(1);
  torch::manual_seed(1);
  torch::nn::LSTMCell cell(torch::nn::LSTMCellOptions(hidden, hidden));
  Inputs in(hidden, batch);
  run(state, *cell, in.x, in.dz, [&] {
    auto h = in.h0[0], c = in.c0[0];  // [B, H]
    std::vector<torch::Tensor> z;
    z.reserve(kSteps);
    for (int64_t t = 0; t < kSteps; ++t) {
      std::tie(h, c) = cell->forward(in.x[t], std::make_tuple(h, c));
      z.push_back(h);
    }
    return torch::stack(z);  // [T, B, H]
  });
  set_counters(state, hidden, batch);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"H", "B"})
      ->ArgsProduct({{256, 512, 1024, 2048}, {8, 32, 128}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();  // BLAS runs on several threads: wall-clock time is what counts
}

BENCHMARK_CAPTURE(BM_LstmBlock, gates, LstmSave::kGates)->Apply(grid);
BENCHMARK_CAPTURE(BM_LstmBlock, preactivations, LstmSave::kPreactivations)->Apply(grid);
BENCHMARK(BM_TorchLstm)->Apply(grid);
BENCHMARK(BM_TorchLstmCellLoop)->Apply(grid);

}  // namespace

int main(int argc, char** argv) {
  return vlrnn::bench::run_cell_benchmarks(argc, argv, g_peak_flops_per_second,
                                            {{"steps", std::to_string(kSteps)},
                                             {"dtype", "float32"}});
}
