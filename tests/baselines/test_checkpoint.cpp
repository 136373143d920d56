#include "test_util.h"

#include "vlrnn/baselines/checkpoint_function.h"
#include "vlrnn/baselines/checkpoint_method.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;
using testing::SmallProblem;

TEST(CheckpointFunction, RecomputesOnceAndGivesTheSameGradients) {
  auto w = torch::randn({4, 4}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto x = torch::randn({3, 4}, torch::dtype(torch::kFloat64).requires_grad(true));
  int calls = 0;
  auto fn = [&](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
    ++calls;
    return {torch::tanh(torch::matmul(in[0], w)).pow(2)};
  };
  auto out = checkpoint(fn, {x});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(out[0].requires_grad());
  out[0].sum().backward();
  EXPECT_EQ(calls, 2);  // the recomputation, during backward
  auto w_grad = w.grad().clone(), x_grad = x.grad().clone();
  w.mutable_grad() = torch::Tensor();
  x.mutable_grad() = torch::Tensor();
  fn({x})[0].sum().backward();
  EXPECT_TRUE(torch::allclose(w_grad, w.grad(), 1e-14, 1e-14));
  EXPECT_TRUE(torch::allclose(x_grad, x.grad(), 1e-14, 1e-14));
}

TEST(CheckpointFunction, PreservesTheRngStateForTheRecomputation) {
  auto w = torch::randn({8}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto x = torch::randn({8}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto fn = [&](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
    return {torch::dropout(in[0] * w, 0.5, /*train=*/true)};
  };
  torch::manual_seed(3);
  checkpoint(fn, {x})[0].sum().backward();
  auto checkpointed = w.grad().clone();
  w.mutable_grad() = torch::Tensor();
  torch::manual_seed(3);
  fn({x})[0].sum().backward();
  EXPECT_TRUE(torch::allclose(checkpointed, w.grad(), 1e-14, 1e-14));
  EXPECT_GT((w.grad() == 0).sum().item<int64_t>(), 0);  // the mask dropped something
}

TEST(CheckpointMethod, CountsOneRecomputationOfEveryStep) {
  SmallProblem p("gru", 20);
  for (int64_t s : {1, 3, 20}) {
    auto result = CheckpointMethod(CheckpointOptions().with_segments(s)).compute(p.workload());
    EXPECT_EQ(result.counters.forward_no_grad, 20);
    EXPECT_EQ(result.counters.forward_with_grad, 20);
    EXPECT_EQ(result.counters.backward, 20);
  }
  EXPECT_EQ(CheckpointMethod().segments_for(100), 10);
  EXPECT_EQ(CheckpointMethod(CheckpointOptions().with_segments(50)).segments_for(20), 20);
}

// After the step, the generators are where one forward pass leaves them: a training loop
// draws the same numbers next whichever method it used.
TEST(CheckpointMethod, LeavesTheGeneratorWhereFullBpttDoes) {
  for (const std::string method : {"checkpoint:segments=3", "vlrnn:block_length=4", "tbptt:k1=3,k2=5"}) {
    SmallProblem p("lstm", 13, 2, torch::kFloat64, 3);
    p.model = make_model({"lstm", 3, 4, 3, 0.3});
    p.model->to(torch::kFloat64);
    torch::manual_seed(21);
    make_method("full")->compute(p.workload());
    auto after_full = torch::rand({4});
    torch::manual_seed(21);
    make_method_from_spec(method)->compute(p.workload());
    EXPECT_TRUE(torch::equal(torch::rand({4}), after_full)) << method;
  }
}

TEST(CheckpointMethod, BadOptionsAreRejected) {
  expect_error_mentions([] { make_method("checkpoint", {{"segments", 0}}); },
                        {"checkpoint segments", ">= 1", "got 0"});
  expect_error_mentions([] { make_method("checkpoint", {{"segments", -2}}); }, {"segments", "-2"});
  expect_error_mentions([] { CheckpointMethod(CheckpointOptions().with_segments(-1)); },
                        {"segments", "positive", "-1"});
  expect_error_mentions([] { make_method("checkpoint", {{"head_inside", 2}}); },
                        {"head_inside", "1", "0", "got 2"});
}

}  // namespace
}  // namespace vlrnn
