// One verification case on a device (verify/src/case.cpp): its name and rerun command say
// where it ran, and it runs there or reports why it could not, without throwing.
#include "test_util.h"

#include "vlrnn/verify/case.h"
#include "vlrnn/verify/random_cases.h"
#include "vlrnn/verify/report.h"

#include <nlohmann/json.hpp>

namespace vlrnn::verify::case_test {
namespace {

// The case the matrix knows best: three LSTM layers with dropout between them (the CUDA
// generator's replay), variable lengths, h0 with a gradient, float64.
VerifyCase dropout_case(torch::Device device) {
  VerifyCase c;
  c.model = "lstm";
  c.num_layers = 3;
  c.dropout = 0.3;
  c.batch = 4;
  c.lengths = {17, 28, 1, 4};
  c.device = device;
  return c;
}

TEST(VerifyCase, TheNameAndRecordSayTheDeviceOffTheCpu) {
  const auto on_cpu = dropout_case(torch::kCPU);
  EXPECT_EQ(on_cpu.name().find("cuda"), std::string::npos) << on_cpu.name();
  const auto on_gpu = dropout_case(torch::Device("cuda:1"));
  EXPECT_EQ(on_gpu.name(), on_cpu.name() + "/cuda:1");
  VerifyOutcome outcome;
  outcome.spec = on_gpu;
  EXPECT_EQ(nlohmann::json::parse(outcome_json(outcome))["device"], "cuda:1");
}

TEST(VerifyCase, ARerunCommandKeepsTheDevice) {
  auto c = random_configuration(random_case_seed(3, 5)).front();
  EXPECT_EQ(random_case_command(c).find("--device"), std::string::npos);
  c.device = torch::Device("cuda:0");
  EXPECT_NE(random_case_command(c).find(" --device cuda:0"), std::string::npos)
      << random_case_command(c);
}

// With a GPU, the case passes there, dropout and lengths included; without one, it is a
// failed row with the error, never an exception or a pass.
TEST(VerifyCase, ACaseRunsOnItsDeviceOrSaysWhyNot) {
  const auto outcome = run_case(dropout_case(torch::Device("cuda:0")));
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(outcome.passed) << outcome.error << " max rel " << outcome.diff.max_rel;
  } else {
    EXPECT_FALSE(outcome.passed);
    EXPECT_FALSE(outcome.error.empty());
  }
  const auto on_cpu = run_case(dropout_case(torch::kCPU));
  EXPECT_TRUE(on_cpu.passed) << on_cpu.error << " max rel " << on_cpu.diff.max_rel;
}

}  // namespace
}  // namespace vlrnn::verify::case_test
