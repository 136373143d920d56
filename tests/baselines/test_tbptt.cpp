#include "test_util.h"

#include "vlrnn/baselines/tbptt.h"
#include "vlrnn/verify/compare.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;
using testing::SmallProblem;

std::vector<torch::Tensor> parameter_grads(const SmallProblem& p, const std::string& method) {
  for (auto& param : p.model->parameters()) param.mutable_grad() = torch::Tensor();
  for (auto& param : p.head->parameters()) param.mutable_grad() = torch::Tensor();
  torch::manual_seed(17);
  make_method_from_spec(method)->compute(p.workload({}, Reduction::kSum));
  std::vector<torch::Tensor> grads;
  for (auto& param : p.model->parameters()) grads.push_back(param.grad().clone());
  for (auto& param : p.head->parameters()) grads.push_back(param.grad().clone());
  return grads;
}

double max_rel_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, ((a[i] - b[i]).abs().max() / b[i].abs().max()).item<double>());
  }
  return worst;
}

TEST(Tbptt, WindowAtLeastTIsFullBptt) {
  for (const std::string kind : {"rnn", "lstm", "gru_lstm"}) {
    SmallProblem p(kind, 15);
    auto full = parameter_grads(p, "full");
    EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k=15"), full), 1e-10) << kind;
    EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k=40"), full), 1e-10) << kind;
    EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k1=5,k2=15"), full), 1e-10) << kind;
  }
}

// A task with a long-range dependency: the loss at every step depends on the first input
// through the state, so a short window must lose gradient.
TEST(Tbptt, ShortWindowDiffersFromFull) {
  SmallProblem p("lstm", 40);
  auto full = parameter_grads(p, "full");
  EXPECT_GT(max_rel_diff(parameter_grads(p, "tbptt:k=2"), full), 1e-3);
}

// TBPTT(k) against a hand-written loop: detach every k steps, back-propagate each chunk.
TEST(Tbptt, EqualsAHandWrittenTruncatedLoop) {
  SmallProblem p("gru", 17);
  const int64_t k = 5;
  auto reference = [&] {
    for (auto& param : p.model->parameters()) param.mutable_grad() = torch::Tensor();
    for (auto& param : p.head->parameters()) param.mutable_grad() = torch::Tensor();
    auto h = p.model->initial_state(2, torch::dtype(torch::kFloat64));
    for (int64_t t0 = 0; t0 < 17; t0 += k) {
      const int64_t n = std::min(k, 17 - t0);
      auto [z, exit] = p.model->forward(p.batch.inputs.narrow(0, t0, n), h.detached());
      p.head->forward(z, p.batch.targets.narrow(0, t0, n)).sum().backward();
      h = exit;
    }
    std::vector<torch::Tensor> grads;
    for (auto& param : p.model->parameters()) grads.push_back(param.grad().clone());
    for (auto& param : p.head->parameters()) grads.push_back(param.grad().clone());
    return grads;
  }();
  EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k=5"), reference), 1e-12);
}

// Overlapping windows re-run steps without drawing new dropout masks: when every window
// reaches step 0 the result is full BPTT's exactly, even though the windows are recomputed.
TEST(Tbptt, OverlappingWindowsReplayTheSameDropoutMasks) {
  SmallProblem p("lstm", 12, 2, torch::kFloat64, 3);
  p.model = make_model({"lstm", 3, 4, 3, 0.3});
  p.model->to(torch::kFloat64);
  auto full = parameter_grads(p, "full");
  EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k1=5,k2=15"), full), 1e-10);
  // The last chunk [10, 12) of TBPTT(5, 12) reaches back to step 3 only: truncated.
  EXPECT_GT(max_rel_diff(parameter_grads(p, "tbptt:k1=5,k2=12"), full), 1e-6);
  EXPECT_LE(max_rel_diff(parameter_grads(p, "tbptt:k1=1,k2=12"), full), 1e-10);
}

TEST(Tbptt, CountsTheStepsOfEveryWindow) {
  SmallProblem p("rnn", 12);
  auto plain = TbpttMethod(TbpttOptions().with_k(4)).compute(p.workload());
  EXPECT_EQ(plain.counters.forward_with_grad, 12);
  EXPECT_EQ(plain.counters.backward, 12);
  EXPECT_EQ(plain.counters.forward_no_grad, 0);
  // k1 = 4, k2 = 6: windows [0,4) [2,8) [6,12) → 4 + 6 + 6 steps back-propagated.
  auto overlapping = TbpttMethod(TbpttOptions().with_k1(4).with_k2(6)).compute(p.workload());
  EXPECT_EQ(overlapping.counters.backward, 16);
  EXPECT_EQ(overlapping.counters.forward_with_grad, 16);
}

TEST(Tbptt, BadOptionsAreRejected) {
  expect_error_mentions([] { make_method("tbptt", {{"k", 0}}); }, {"tbptt k", ">= 1", "got 0"});
  expect_error_mentions([] { make_method("tbptt", {{"k1", -1}, {"k2", 4}}); }, {"k1", "-1"});
  expect_error_mentions([] { make_method("tbptt", {{"k1", 8}, {"k2", 4}}); },
                        {"k1 <= k2", "k1 = 8", "k2 = 4"});
  expect_error_mentions([] { make_method("tbptt", {{"k", 3}, {"k1", 2}}); }, {"k", "k1"});
}

TEST(Tbptt, IsReportedAsApproximate) {
  EXPECT_FALSE(make_method("tbptt")->is_exact());
  EXPECT_EQ(make_method_from_spec("tbptt:k1=2,k2=6")->describe(), "tbptt(k1=2,k2=6)");
}

}  // namespace
}  // namespace vlrnn
