// Bad input to any gradient method: each error names the argument, what was expected and
// what came.
#include "test_util.h"

namespace vlrnn {
namespace {

using testing::expect_error_mentions;
using testing::SmallProblem;

class Validation : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<GradientMethod> method = make_method(GetParam());
};

TEST_P(Validation, InputsOfWrongRank) {
  SmallProblem p;
  p.batch.inputs = p.batch.inputs.flatten(1);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.inputs", "rank 3", "got rank 2"});
}

TEST_P(Validation, EmptySequence) {
  SmallProblem p;
  p.batch.inputs = p.batch.inputs.narrow(0, 0, 0);
  p.batch.targets = p.batch.targets.narrow(0, 0, 0);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.inputs", "T > 0", "T = 0"});
}

TEST_P(Validation, TargetsWithOtherT) {
  SmallProblem p;
  p.batch.targets = p.batch.targets.narrow(0, 0, 5);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.targets", "[12, 2]", "[5, 2]"});
}

TEST_P(Validation, TargetsWithOtherB) {
  SmallProblem p;
  p.batch.targets = torch::zeros({12, 3}, torch::kLong);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.targets", "[12, 2]", "[12, 3]"});
}

TEST_P(Validation, StateWithWrongBatchSize) {
  SmallProblem p;
  State h0{torch::zeros({1, 5, 4}, torch::kFloat64), torch::zeros({1, 5, 4}, torch::kFloat64)};
  expect_error_mentions([&] { method->compute(p.workload(h0)); },
                        {"h0[0]", "[1, 2, 4]", "batch size 2", "[1, 5, 4]"});
}

TEST_P(Validation, StateWithWrongHiddenSize) {
  SmallProblem p;
  State h0{torch::zeros({1, 2, 4}, torch::kFloat64), torch::zeros({1, 2, 7}, torch::kFloat64)};
  expect_error_mentions([&] { method->compute(p.workload(h0)); },
                        {"h0[1] (c)", "[1, 2, 4]", "[1, 2, 7]"});
}

TEST_P(Validation, StateWithWrongTupleSize) {
  SmallProblem p;
  State h0{torch::zeros({1, 2, 4}, torch::kFloat64)};
  expect_error_mentions([&] { method->compute(p.workload(h0)); },
                        {"h0", "2 tensors (h, c)", "got 1"});
}

TEST_P(Validation, InputsWithWrongFeatureCount) {
  SmallProblem p;
  p.batch.inputs = torch::randn({12, 2, 5}, torch::kFloat64);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.inputs", "F = 3", "got 5"});
}

TEST_P(Validation, InputsOfOtherDtypeThanTheModel) {
  SmallProblem p;
  p.batch.inputs = p.batch.inputs.to(torch::kFloat32);
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"model parameter", "Double", "Float"});
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, Validation, ::testing::ValuesIn(method_names()));

}  // namespace
}  // namespace vlrnn
