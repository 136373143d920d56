#include "test_util.h"

namespace vlrnn {
namespace {

// Full BPTT against a hand-written autograd computation of the same loss: an independent
// reference for the reference.
TEST(FullBptt, EqualsAHandWrittenAutogradLoss) {
  testing::SmallProblem p("lstm", 9, 3);
  auto h0 = p.model->initial_state(3, torch::dtype(torch::kFloat64));
  auto [z, h] = p.model->forward(p.batch.inputs, h0);
  auto losses = p.head->forward(z, p.batch.targets);  // [T, B]
  auto manual_loss = losses.sum();
  auto params = p.model->parameters();
  auto manual_grads = torch::autograd::grad({manual_loss}, params);

  auto result = make_method("full")->compute(p.workload({}, Reduction::kSum));
  EXPECT_NEAR(result.loss.item<double>(), manual_loss.item<double>(), 1e-12);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), manual_grads[i], 1e-12, 1e-14)) << i;
  }
  EXPECT_EQ(result.counters.forward_with_grad, 9);
  EXPECT_EQ(result.counters.forward_no_grad, 0);
  EXPECT_EQ(result.counters.backward, 9);
}

TEST(FullBptt, MeanIsTheSumOverTB) {
  testing::SmallProblem p("gru", 8, 2);
  auto sum = make_method("full")->compute(p.workload({}, Reduction::kSum)).loss.item<double>();
  auto mean = make_method("full")->compute(p.workload({}, Reduction::kMean)).loss.item<double>();
  EXPECT_NEAR(mean, sum / 16.0, 1e-12);
}

}  // namespace
}  // namespace vlrnn
