// A method's compute() leaves no global state behind: the CPU allocator, the peak counters,
// the generators (except as one forward pass moves them), grad mode and thread counts are as
// it found them, also when it throws midway; and the planner's cost-model cache is keyed by
// everything that changes cost, bounded and safe from two threads.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/schedule/planner_method.h"

#include <thread>

namespace vlrnn {
namespace {

using measure::CpuMemoryTracker;
using measure::IterationMemoryScope;

// One spec per method of the registry (the planner with a budget of its own).
std::vector<std::string> every_method() {
  std::vector<std::string> specs;
  for (const auto& name : method_names()) {
    if (!handles_left_to_right(name)) continue;  // bivlrnn: tests/schedule/test_bidirectional_vlrnn.cpp
    specs.push_back(name == "planner" ? "planner:percent=20" : name);
  }
  return specs;
}

// A dropout model, so that the generators move; shapes no other test uses, so that the
// planner starts cold.
struct DropoutProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;
  explicit DropoutProblem(int64_t steps = 19) {
    torch::manual_seed(3);
    model = make_model({"lstm", 3, 7, 2, 0.4});
    model->to(torch::kFloat64);
    head = make_head("ce", 7, 3);
    head->to(torch::kFloat64);
    batch.inputs = torch::randn({steps, 2, 3}, torch::kFloat64);
    batch.targets = torch::randint(0, 3, {steps, 2}, torch::kLong);
  }
  Workload workload() const { return {*model, *head, batch}; }
};

// The next number the CPU generator would draw, without moving it.
double next_draw() {
  const auto saved = RngState::capture(torch::kCPU);
  const double x = torch::rand({1}, torch::kFloat64).item<double>();
  saved.restore();
  return x;
}

TEST(SideEffects, EveryMethodLeavesTheAllocatorGradModeAndThreadsAsItFoundThem) {
  DropoutProblem p;
  const int threads = at::get_num_threads();
  for (const auto& spec : every_method()) {
    for (bool installed_before : {false, true}) {
      auto& tracker = CpuMemoryTracker::instance();
      if (installed_before) tracker.install(); else tracker.uninstall();
      make_method_from_spec(spec)->compute(p.workload());
      EXPECT_EQ(tracker.installed(), installed_before) << spec;
      EXPECT_TRUE(torch::GradMode::is_enabled()) << spec;
      EXPECT_EQ(at::get_num_threads(), threads) << spec;
    }
  }
  CpuMemoryTracker::instance().uninstall();
}

TEST(SideEffects, EveryMethodMovesTheGeneratorsOnlyAsOneForwardPassWould) {
  DropoutProblem p;
  torch::manual_seed(21);
  make_method("full")->compute(p.workload());
  const double after_full = next_draw();
  for (const auto& spec : every_method()) {
    torch::manual_seed(21);
    make_method_from_spec(spec)->compute(p.workload());
    EXPECT_EQ(next_draw(), after_full) << spec;
  }
}

TEST(SideEffects, AMethodThatThrowsMidwayLeavesTheGeneratorWhereItWas) {
  DropoutProblem p(/*steps=*/30);
  for (const std::string spec : {"vlrnn:block_length=4", "checkpoint:segments=5", "tbptt:k=4",
                                 "revolve:slots=3"}) {
    auto throwing = std::make_shared<testing::ThrowsOnCall>(p.model, 3);
    torch::manual_seed(5);
    const double before = next_draw();
    EXPECT_THROW(make_method_from_spec(spec)->compute({*throwing, *p.head, p.batch}),
                 c10::Error) << spec;
    EXPECT_EQ(throwing->calls_, 3) << spec << ": the model should have run up to its third block";
    EXPECT_EQ(next_draw(), before) << spec;
    EXPECT_TRUE(torch::GradMode::is_enabled()) << spec;
  }
}

// NOTE [ Nested iteration scopes ]: the planner's calibration, nested in a measured step, must
// not change what the step reports.
TEST(SideEffects, StepPeakAroundAColdPlannerEqualsTheOneAroundAWarmPlanner) {
  torch::manual_seed(4);
  auto model = make_model({"gru", 5, 11, 1});
  auto head = make_head("mse", 11, 2);
  SequenceBatch batch;
  batch.inputs = torch::randn({41, 3, 5});
  batch.targets = torch::randn({41, 3, 2});
  const Workload workload{*model, *head, batch};
  auto iteration_peak = [&] {
    // Each step starts as the first did: no gradient buffers yet.
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
    auto planner = make_method("planner", {{"percent", 15}});
    IterationMemoryScope scope(torch::kCPU);
    planner->compute(workload);
    return scope.finish().iteration_peak_bytes;
  };
  // The first capture of the generators in a thread keeps one snapshot for good (NOTE [ Shared
  // RNG snapshots ]): take it before, as any earlier step would have.
  RngState::capture(torch::kCPU);
  // An earlier test in this process may have installed the tracker for good.
  const bool installed_before = CpuMemoryTracker::instance().installed();
  // Counted as misses, not as entries: after other tests the bounded cache may be full.
  const auto misses = schedule::cost_model_cache_misses();
  const int64_t cold = iteration_peak();
  ASSERT_EQ(schedule::cost_model_cache_misses(), misses + 1) << "the first planner was not cold";
  const int64_t warm = iteration_peak();
  const int64_t warm_again = iteration_peak();
  EXPECT_EQ(warm, warm_again);
  EXPECT_EQ(cold, warm);
  // The scopes leave the tracker as they found it.
  EXPECT_EQ(CpuMemoryTracker::instance().installed(), installed_before);
}

TEST(SideEffects, NestedScopesKeepTheEnclosingPeak) {
  IterationMemoryScope outer(torch::kCPU);
  { auto big = torch::empty({1 << 18}, torch::kFloat32); }  // 1 MiB, freed
  {
    IterationMemoryScope inner(torch::kCPU);
    { auto small = torch::empty({1 << 10}, torch::kFloat32); }  // 4 KiB
    EXPECT_EQ(inner.finish().iteration_peak_bytes, 1 << 12);
  }
  {
    IterationMemoryScope inner(torch::kCPU);
    { auto huge = torch::empty({1 << 20}, torch::kFloat32); }  // 4 MiB inside the nested scope
    EXPECT_EQ(inner.finish().iteration_peak_bytes, 1 << 22);
  }
  auto kept = torch::empty({1 << 8}, torch::kFloat32);  // 1 KiB after the nested scopes
  // The outer step saw its own 1 MiB, not the nested measurement's 4 MiB.
  EXPECT_EQ(outer.finish().iteration_peak_bytes, 1 << 20);
}

TEST(SideEffects, CostModelCacheTellsModelsWithTheSameShapesApart) {
  torch::manual_seed(8);
  SequenceBatch batch;
  batch.inputs = torch::randn({9, 2, 3});
  batch.targets = torch::randn({9, 2, 2});
  const auto before = schedule::cost_model_cache_misses();
  for (const std::string kind : {"gru", "gru_v1", "gru_v3"}) {  // same parameter shapes
    auto model = make_model({kind, 3, 6, 1});
    auto head = make_head("mse", 6, 2);
    schedule::measured_cost_model(validated({*model, *head, batch}));
  }
  EXPECT_EQ(schedule::cost_model_cache_misses(), before + 3);  // three models, none shared
}

TEST(SideEffects, CostModelCacheIsBoundedAndSafeFromTwoThreads) {
  torch::manual_seed(8);
  auto model = make_model({"rnn", 2, 3, 1});
  auto head = make_head("mse", 3, 1);
  std::vector<SequenceBatch> batches;
  for (int64_t sequences = 1; sequences < 25; ++sequences) {  // 24 cost-model signatures
    SequenceBatch batch;
    batch.inputs = torch::randn({4, sequences, 2});
    batch.targets = torch::randn({4, sequences, 1});
    batches.push_back(batch);
  }
  for (const auto& batch : batches) {
    schedule::measured_cost_model(validated({*model, *head, batch}));
    EXPECT_LE(schedule::cached_cost_models(), 16u);
  }
  EXPECT_EQ(schedule::cached_cost_models(), 16u);  // full: the bound was reached
  SequenceBatch fresh;
  fresh.inputs = torch::randn({31, 30, 2});
  fresh.targets = torch::randn({31, 30, 1});
  const Workload workload = validated({*model, *head, fresh});
  schedule::CostModel a, b;
  std::thread first([&] { a = schedule::measured_cost_model(workload); });
  std::thread second([&] { b = schedule::measured_cost_model(workload); });
  first.join();
  second.join();
  EXPECT_EQ(a.step.tape_bytes, b.step.tape_bytes);  // one measurement, shared
  EXPECT_EQ(a.step.forward_seconds, b.step.forward_seconds);
}

}  // namespace
}  // namespace vlrnn
