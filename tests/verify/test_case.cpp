// One verification case on a device (verify/src/case.cpp): its name and rerun command say
// where it ran, and it runs there or reports why it could not, without throwing.
#include "test_util.h"

#include "vlrnn/verify/case.h"
#include "vlrnn/verify/random_cases.h"
#include "vlrnn/verify/report.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

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

// run_case keeps each case's full-BPTT reference (NOTE [ One reference per case ]). A case
// that differs from an earlier one in any field but its method is another computation: with
// the earlier case's reference it would fail (other values) or error (other tensors).
TEST(VerifyCase, ACaseThatDiffersInAnyFieldGetsItsOwnReference) {
  const auto base = dropout_case(torch::kCPU);
  std::vector<std::pair<std::string, std::function<void(VerifyCase&)>>> changes = {
      {"model", [](VerifyCase& c) { c.model = "gru"; }},
      {"num_layers", [](VerifyCase& c) { c.num_layers = 2; }},
      {"dropout", [](VerifyCase& c) { c.dropout = 0.25; }},
      {"head", [](VerifyCase& c) { c.head = "mse"; }},
      {"reduction", [](VerifyCase& c) { c.reduction = "sum"; }},
      {"dtype", [](VerifyCase& c) { c.dtype = torch::kFloat32; }},
      {"h0_with_grad", [](VerifyCase& c) { c.h0_with_grad = false; }},
      {"inputs_with_grad", [](VerifyCase& c) { c.inputs_with_grad = false; }},
      {"lengths", [](VerifyCase& c) { c.lengths = {16, 28, 2, 4}; }},  // the same name
      {"segment_starts", [](VerifyCase& c) { c.segment_starts = {{0, 9}, {0}, {0}, {0, 2}}; }},
      {"time_steps", [](VerifyCase& c) { c.time_steps = 30; }},
      {"batch", [](VerifyCase& c) {
         c.batch = 5;
         c.lengths = {17, 28, 1, 4, 9};
       }},
      {"input_size", [](VerifyCase& c) { c.input_size = 3; }},
      {"hidden_size", [](VerifyCase& c) { c.hidden_size = 6; }},
      {"seed", [](VerifyCase& c) { c.seed += 1; }}};
  const auto first = run_case(base);
  ASSERT_TRUE(first.passed) << first.error;
  for (const auto& [field, change] : changes) {
    auto c = base;
    change(c);
    c.method = "vlrnn:block_length=5";  // the method is no part of the reference
    const auto outcome = run_case(c);
    EXPECT_TRUE(outcome.passed) << field << ": " << outcome.error << " max rel "
                                << outcome.diff.max_rel;
    EXPECT_LE(outcome.diff.max_rel, outcome.tolerance) << field;
  }
}

}  // namespace
}  // namespace vlrnn::verify::case_test
