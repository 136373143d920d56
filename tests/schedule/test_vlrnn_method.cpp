#include "test_util.h"

#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/vlrnn_method.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;
using testing::SmallProblem;

TEST(VlrnnMethod, RunsExactlyOneExtraForwardWithoutGradMinusTheLastBlock) {
  SmallProblem p("gru", /*steps=*/23);
  for (int64_t k : {1, 4, 5, 23, 40}) {
    VlrnnMethod method(VlrnnOptions().with_block_length(k));
    const auto result = method.compute(p.workload());
    const int64_t last_block = 23 - ((23 - 1) / std::min<int64_t>(k, 23)) * std::min<int64_t>(k, 23);
    EXPECT_EQ(result.counters.forward_with_grad, 23) << "K=" << k;
    EXPECT_EQ(result.counters.backward, 23) << "K=" << k;
    EXPECT_EQ(result.counters.forward_no_grad, 23 - last_block) << "K=" << k;
  }
}

TEST(VlrnnMethod, NumBlocksSetsTheBlockLength) {
  const SmallProblem ten("gru", 10);
  EXPECT_EQ(VlrnnMethod(VlrnnOptions().with_num_blocks(4)).block_length_for(ten.workload()), 3);
  EXPECT_EQ(VlrnnMethod(VlrnnOptions().with_block_length(64)).block_length_for(ten.workload()), 10);
  // A small state: the default is ceil(sqrt(T)) on any cache.
  EXPECT_EQ(VlrnnMethod().block_length_for(SmallProblem("gru", 100).workload()), 10);
}

// The default follows NOTE [ A block that fits the cache ]: a batch whose block of sqrt(T)
// steps overflows this machine's L2 gets the shorter block the rule gives.
TEST(VlrnnMethod, DefaultBlockFitsTheCache) {
  SmallProblem wide("lstm", 400, /*batch_size=*/1024, torch::kFloat32);  // 32 KiB of state a step
  const auto workload = wide.workload();
  const int64_t K = VlrnnMethod().block_length_for(workload);
  EXPECT_EQ(K, cache_fitting_block_length(400, 1024 * 2 * 4 * 4, l2_cache_bytes()));
  if (l2_cache_bytes() >= 20 * 32 * 1024) EXPECT_EQ(K, 20);  // sqrt(400) fits
  if (l2_cache_bytes() > 0 && l2_cache_bytes() < 5 * 32 * 1024) EXPECT_EQ(K, 5);  // the floor
}

TEST(VlrnnMethod, NonPositiveBlockLengthIsRejected) {
  expect_error_mentions([] { VlrnnMethod(VlrnnOptions().with_block_length(-3)); },
                        {"block_length (K)", "positive", "-3"});
  expect_error_mentions([] { make_method("vlrnn", {{"block_length", 0}}); },
                        {"vlrnn block", "K >= 1", "got 0"});
  expect_error_mentions([] { make_method("vlrnn", {{"block_length", -5}}); }, {"block_length", "-5"});
  expect_error_mentions([] { make_method("vlrnn", {{"num_blocks", 0}}); }, {"num_blocks", "N >= 1", "0"});
}

TEST(VlrnnMethod, PerStepLossesAndFinalStateMatchFull) {
  SmallProblem p("lstm", 17);
  auto full = make_method("full")->compute(p.workload());
  auto blocked = make_method("vlrnn", {{"block_length", 4}})->compute(p.workload());
  EXPECT_TRUE(torch::allclose(full.step_losses, blocked.step_losses, 1e-12, 1e-12));
  EXPECT_FALSE(blocked.step_losses.requires_grad());
  EXPECT_FALSE(blocked.loss.requires_grad());
  for (size_t i = 0; i < full.final_state.size(); ++i) {
    EXPECT_TRUE(torch::allclose(full.final_state[i], blocked.final_state[i], 1e-12, 1e-12));
  }
}

// dL/dx through a non-leaf input (an upstream layer) reaches that layer's parameters.
TEST(VlrnnMethod, InputGradientFlowsIntoAnUpstreamGraph) {
  SmallProblem p("rnn", 10);
  auto embed = torch::randn({3, 3}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto raw = p.batch.inputs.clone();
  auto grads = [&](const std::string& method) {
    embed.mutable_grad() = torch::Tensor();
    SequenceBatch batch = p.batch;
    batch.inputs = torch::matmul(raw, embed);  // [T, B, F], non-leaf
    make_method_from_spec(method)->compute({*p.model, *p.head, batch});
    return embed.grad().clone();
  };
  auto reference = grads("full");
  auto blocked = grads("vlrnn:block_length=3");
  EXPECT_TRUE(torch::allclose(reference, blocked, 1e-10, 1e-12));
  EXPECT_GT(reference.abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace vlrnn
