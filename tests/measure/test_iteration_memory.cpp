#include "test_util.h"

#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/measure/iteration_memory.h"

namespace vlrnn::measure {
namespace {

TEST(IterationMemoryScope, ReportsThePeakAboveTheBytesLiveAtTheStart) {
  auto before = torch::empty({1 << 18}, torch::kFloat32);  // 1 MiB live at the start
  IterationMemoryScope scope(torch::kCPU);
  auto kept = torch::empty({1 << 16}, torch::kFloat32);  // 256 KiB
  { auto temporary = torch::empty({1 << 17}, torch::kFloat32); }  // 512 KiB
  const auto memory = scope.finish();
  EXPECT_EQ(memory.iteration_peak_bytes, (1 << 18) + (1 << 19));
  EXPECT_EQ(memory.end_bytes - memory.start_bytes, 1 << 18);
  EXPECT_EQ(memory.peak_bytes - memory.start_bytes, memory.iteration_peak_bytes);
}

TEST(IterationMemoryScope, ReportsTheProcessPeakRss) {
  IterationMemoryScope scope(torch::kCPU);
  const auto memory = scope.finish();
  EXPECT_GT(memory.peak_rss_bytes, 0);  // Linux: /proc/self/status has VmHWM
}

TEST(WorkloadBytes, CountsParametersAndDataOnce) {
  testing::SmallProblem p("lstm", /*steps=*/12, /*batch=*/2);  // float64, F = 3, H = 4, C = 3
  const int64_t params = (4 * 4 * 3 + 4 * 4 * 4 + 2 * 4 * 4) + (3 * 4 + 3);
  const int64_t expected = params * 8 + 12 * 2 * 3 * 8 + 12 * 2 * 8;  // + inputs + targets
  EXPECT_EQ(workload_bytes(p.workload()), expected);
}

// Iteration peak of `spec` on a model of `kind` (an LSTM by default) with F = 8, H = 32,
// C = 8, B = 4, T steps, float32 (the head reads the model's output: 2H when bidirectional).
int64_t spec_iteration_peak(const std::string& spec, int64_t steps,
                            const std::string& kind = "lstm") {
  torch::manual_seed(3);
  auto model = make_model({kind, 8, 32, 1});
  auto head = make_head("ce", model->output_size(), 8);
  SequenceBatch batch;
  batch.inputs = torch::randn({steps, 4, 8});                  // [T, B, F]
  batch.targets = torch::randint(0, 8, {steps, 4}, torch::kLong);  // [T, B]
  const Workload workload{*model, *head, batch};
  auto method = make_method_from_spec(spec);
  measure_iteration(*method, workload, torch::kCPU);  // warm: first-call allocations
  return measure_iteration(*method, workload, torch::kCPU).memory.iteration_peak_bytes;
}

// NOTE: what this proves is that nothing of a block's graph outlives the block: with K
// fixed, VLRNN's iteration peak barely moves when T grows 4x (only the stored block-entry states
// and the [T, B] per-step losses grow), while full BPTT keeps all T steps' activations.
// The linear recurrences too: their exit state is the last row of the block's scan output,
// and a stored state that stayed a view of it kept every block's whole output alive (NOTE
// [ Stored states are compact ] in vlrnn/core/state.h).
// The bidirectional block method too (bilstm): its blocks' graphs are freed as each sweep
// passes them, whichever the direction.
TEST(IterationMemory, VlrnnPeakIsFlatInTWhileFullBpttGrowsLinearly) {
  for (const std::string kind : {"lstm", "mingru", "minlstm", "lru", "ssm", "bilstm"}) {
    const std::string block = kind == "bilstm" ? "bivlrnn:block_length=16" : "vlrnn:block_length=16";
    const double vlrnn_growth = double(spec_iteration_peak(block, 1024, kind)) /
                                double(spec_iteration_peak(block, 256, kind));
    const double full_growth = double(spec_iteration_peak("full", 1024, kind)) /
                               double(spec_iteration_peak("full", 256, kind));
    std::printf("%s: iteration peak T=1024 / T=256: %s %.3f, full %.3f\n", kind.c_str(),
                block.c_str(), vlrnn_growth, full_growth);
    EXPECT_LE(vlrnn_growth, 1.5) << kind;
    EXPECT_GE(full_growth, 3.5) << kind;
    EXPECT_LE(full_growth, 4.5) << kind;
  }
}

TEST(IterationMeasurement, ClearsGradientsSoEachStepAllocatesThem) {
  testing::SmallProblem p;
  auto method = make_method("full");
  const auto first = measure_iteration(*method, p.workload(), torch::kCPU);
  const auto second = measure_iteration(*method, p.workload(), torch::kCPU);
  EXPECT_EQ(first.memory.iteration_peak_bytes, second.memory.iteration_peak_bytes);
  EXPECT_EQ(second.counters.forward_with_grad, 12);
  EXPECT_GT(second.seconds, 0.0);
}

}  // namespace
}  // namespace vlrnn::measure

namespace vlrnn::measure {
namespace {

// NOTE [ Preparing is not the step ]: a cold planner's first measured step reports what its
// later steps report, and takes no longer than a few of them (no calibration inside).
TEST(IterationMeasurement, AColdPlannersFirstStepIsLikeItsLaterSteps) {
  torch::manual_seed(6);
  auto model = make_model({"lstm", 4, 13, 2});
  auto head = make_head("ce", 13, 5);
  SequenceBatch batch;
  batch.inputs = torch::randn({57, 3, 4});                    // [T, B, F]
  batch.targets = torch::randint(0, 5, {57, 3}, torch::kLong);  // [T, B]
  const Workload workload{*model, *head, batch};
  RngState::capture(torch::kCPU);  // the thread's first snapshot, kept for good
  auto planner = make_method("planner", {{"percent", 20}});
  const auto first = measure_iteration(*planner, workload, torch::kCPU);
  const auto second = measure_iteration(*planner, workload, torch::kCPU);
  EXPECT_EQ(first.memory.iteration_peak_bytes, second.memory.iteration_peak_bytes);
  EXPECT_EQ(first.counters.forward_no_grad, second.counters.forward_no_grad);
}

}  // namespace
}  // namespace vlrnn::measure
