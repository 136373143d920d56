// NOTE [ Cut dependence, whatever the generator's layout ]: a model that draws its dropout
// mask once per forward() call, [Tb, B, H] at a time, passes every exact method on a CPU
// LibTorch whose Bernoulli fills a tensor element by element (the masks equal per-step
// ones), and fails on a GPU. The verifier must see it anyway, and must not flag models that
// keep the contract.
#include "test_util.h"

#include "vlrnn/verify/case.h"
#include "vlrnn/verify/cut_dependence.h"

namespace vlrnn::verify {
namespace {

// The wrapped model's output z [Tb, B, H] under a dropout mask (keep 0.7), drawn either
// once per call ([Tb, B, H] at a time) or once per step ([B, H] each).
class MaskedOutput : public RecurrentModule {
 public:
  MaskedOutput(std::shared_ptr<RecurrentModule> inner, bool per_call)
      : inner_(register_module("inner", inner)), per_call_(per_call) {}

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h,
                                          const torch::Tensor& lengths) override {
    auto [z, state] = inner_->forward(x, h, lengths);  // z [Tb, B, H], zero past the ends
    torch::Tensor keep;
    if (per_call_) {
      keep = torch::bernoulli(torch::full(z.sizes(), 0.7, z.options()));  // [Tb, B, H]
    } else {
      std::vector<torch::Tensor> steps;  // [B, H] each
      for (int64_t t = 0; t < z.size(0); ++t) {
        steps.push_back(torch::bernoulli(torch::full({z.size(1), z.size(2)}, 0.7, z.options())));
      }
      keep = torch::stack(steps);
    }
    return {z * keep / 0.7, state};
  }
  int64_t input_size() const override { return inner_->input_size(); }
  int64_t output_size() const override { return inner_->output_size(); }
  std::vector<StateSpec> state_spec() const override { return inner_->state_spec(); }

 private:
  std::shared_ptr<RecurrentModule> inner_;
  bool per_call_;
};

CaseInjection masked(bool per_call) {
  CaseInjection injection;
  injection.wrap_model = [per_call](std::shared_ptr<RecurrentModule> model) {
    return std::shared_ptr<RecurrentModule>(std::make_shared<MaskedOutput>(model, per_call));
  };
  return injection;
}

// A float64 LSTM case cut into blocks of 7, on variable lengths.
VerifyCase variable_length_lstm_case() {
  VerifyCase c;
  c.model = "lstm";
  c.head = "mse";
  c.method = "vlrnn:block_length=7";
  c.lengths = {17, 28, 1, 4};
  c.batch = 4;
  return c;
}

TEST(CutDependence, PerCallMasksAreFoundWhateverTheGeneratorsLayout) {
  const auto c = variable_length_lstm_case();
  const double tolerance = tolerance_for(c.dtype);
  const auto cut = case_cut_dependence(c, masked(/*per_call=*/true));
  EXPECT_EQ(cut.cut, 14);
  EXPECT_GT(cut.random_ops, 0);
  EXPECT_GT(cut.any_layout, 1e-3) << "the per-call mask went unnoticed";
  const auto outcome = run_case(c, masked(true));
  ASSERT_TRUE(outcome.error.empty()) << outcome.error;
  if (cut.here <= tolerance) {
    // This build (Debian's CPU LibTorch): one [Tb, B, H] draw equals Tb draws of [B, H],
    // so the case passes, and only the warning tells that it would not on a GPU.
    EXPECT_TRUE(outcome.passed) << "max rel " << outcome.diff.max_rel;
    const auto warning = per_call_draws_warning(cut, tolerance);
    EXPECT_NE(warning.find("once per forward() call"), std::string::npos) << warning;
    EXPECT_NE(warning.find("does not carry over"), std::string::npos) << warning;
  } else {
    // A build that lays the draws out per call: the case fails, and says why.
    EXPECT_FALSE(outcome.passed);
    EXPECT_NE(outcome.diagnosis.find("depend on where the sequence is cut"), std::string::npos);
    EXPECT_TRUE(per_call_draws_warning(cut, tolerance).empty());
  }
}

TEST(CutDependence, PerStepMasksAreNotFlagged) {
  const auto c = variable_length_lstm_case();
  const double tolerance = tolerance_for(c.dtype);
  const auto cut = case_cut_dependence(c, masked(/*per_call=*/false));
  // The observer saw the draws (the check is not vacuous) and the shifts cancelled.
  EXPECT_GE(cut.random_ops, 3 * 28);  // a draw per step in each of the three forwards
  EXPECT_LE(cut.here, tolerance);
  EXPECT_LE(cut.any_layout, tolerance);
  EXPECT_TRUE(per_call_draws_warning(cut, tolerance).empty());
  EXPECT_TRUE(run_case(c, masked(false)).passed);
}

TEST(CutDependence, BuiltInDropoutBetweenLayersIsNotFlagged) {
  VerifyCase c = variable_length_lstm_case();
  c.num_layers = 3;
  c.dropout = 0.3;
  const auto cut = case_cut_dependence(c);
  EXPECT_GT(cut.random_ops, 0);
  EXPECT_LE(cut.any_layout, tolerance_for(c.dtype));
}

TEST(CutDependence, AModelWithoutDrawsIsNotFlaggedAndLeavesTheGeneratorAlone) {
  const auto c = variable_length_lstm_case();
  const auto cut = case_cut_dependence(c);
  EXPECT_EQ(cut.random_ops, 0);
  EXPECT_LE(cut.any_layout, tolerance_for(c.dtype));
  // The observer is gone afterwards: a draw is not followed by an extra one.
  torch::manual_seed(5);
  const auto a = torch::rand({2});
  const auto b = torch::rand({2});
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(torch::rand({4}), torch::cat({a, b})));
}

}  // namespace
}  // namespace vlrnn::verify
