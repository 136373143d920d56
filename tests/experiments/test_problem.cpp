// Benchmark problems (lib/problem.h): resets drawn for streams of segments.
#include "lib/problem.h"
#include "vlrnn/measure/environment.h"

#include "test_util.h"

#include <gtest/gtest.h>

namespace vlrnn::experiments {
namespace {

// --segments N: each sequence a stream of segments of lengths uniform in [1, 2N - 1], so
// about T / N resets per sequence; and every exact method stays exact on it.
TEST(Problem, SegmentsDrawResetsOfTheRequestedMeanLength) {
  ProblemSpec spec;
  spec.model = "gru";
  spec.input_size = 3;
  spec.hidden_size = 4;
  spec.time_steps = 2000;
  spec.batch = 3;
  spec.dtype = torch::kFloat64;
  spec.mean_segment = 8;
  const auto p = make_problem(spec);
  ASSERT_TRUE(p.batch.has_resets());
  EXPECT_NE(spec.describe().find("segments~8"), std::string::npos);
  for (int64_t b = 0; b < spec.batch; ++b) {
    const auto starts = p.batch.resets.select(1, b).sum().item<int64_t>();
    EXPECT_NEAR(double(spec.time_steps) / double(starts), 8.0, 1.0) << "sequence " << b;
  }
  spec.time_steps = 60;
  const auto small = make_problem(spec);
  auto full = make_method("full");
  auto blocks = make_method_from_spec("vlrnn:block_length=7");
  auto gradients = [&](GradientMethod& method) {
    testing::clear_grads(*small.model, *small.head);
    method.compute(small.workload());
    testing::Named grads;
    for (const auto& p : small.model->named_parameters()) grads[p.key()] = p.value().grad().clone();
    return grads;
  };
  testing::expect_close(gradients(*blocks), gradients(*full), 1e-10, "vlrnn with resets");
  spec.mean_segment = -1;
  testing::expect_error_mentions([&] { make_problem(spec); }, {"mean_segment", "-1"});
}

// A device name is checked where it is read: the error names the flag or key it came from,
// and a build or machine that cannot run it says why, instead of failing later on a tensor.
TEST(Problem, ParseDeviceNamesItsArgument) {
  EXPECT_EQ(parse_device("cpu", "--device"), torch::Device(torch::kCPU));
  testing::expect_error_mentions([] { parse_device("tpu", "--device"); },
                                 {"--device", "\"cpu\", \"cuda\" or \"cuda:N\"", "tpu"});
  testing::expect_error_mentions([] { parse_device("cuda:x", "--device"); },
                                 {"--device", "cuda:x"});
  // No machine has 99 GPUs: on a CPU-only build, the build says no; on a CUDA one, the count.
  testing::expect_error_mentions([] { parse_device("cuda:99", "--device"); },
                                 {"--device", "cuda:99"});
  if (!measure::built_with_cuda()) {
    testing::expect_error_mentions([] { parse_device("cuda", "$.device"); },
                                   {"$.device", "CUDA build"});
  }
}

}  // namespace
}  // namespace vlrnn::experiments
