#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/cells/linear_recurrence.h"
#include "vlrnn/verify/compare.h"

#include <cmath>

// Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers.

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::parameters_by_name;
using testing::run_and_backprop;

const std::vector<std::string> kKinds = {"mingru", "minlstm", "lru", "ssm"};

LinearRecurrence& as_linear(RecurrentModule& model) {
  auto* linear = dynamic_cast<LinearRecurrence*>(&model);
  if (linear == nullptr) throw std::runtime_error("not a LinearRecurrence: " + model.name());
  return *linear;
}

// x [T, B, F] NaN-padded past `lengths`, h0 and seeds of L = Σ z ⊙ seed_z + Σ h ⊙ seed_h.
struct ScanData {
  torch::Tensor x, seed_z, lengths;
  State h0;
  std::vector<torch::Tensor> seed_h;
  ScanData(const RecurrentModule& model, std::vector<int64_t> lens, int64_t steps = 13) {
    torch::manual_seed(23);
    const int64_t batch = 4;
    const auto o = torch::dtype(torch::kFloat64);
    x = torch::randn({steps, batch, model.input_size()}, o);
    seed_z = torch::randn({steps, batch, model.output_size()}, o);
    std::vector<torch::Tensor> h;
    for (const auto& spec : model.state_spec()) {
      h.push_back(torch::randn(spec.shape_for_batch(batch), o));
      seed_h.push_back(torch::randn(spec.shape_for_batch(batch), o));
    }
    h0 = State(h);
    if (!lens.empty()) {
      lengths = torch::tensor(lens);
      x = x.masked_fill(step_mask(lengths, steps, torch::kCPU).logical_not().unsqueeze(2), NAN);
    }
  }
};

testing::Named run_form(RecurrentModule& model, RecurrenceForm form, const ScanData& d) {
  as_linear(model).set_form(form);
  return run_and_backprop(
      [&](const torch::Tensor& x, const State& h0) {
        torch::manual_seed(5);  // the same dropout draws for both forms
        return model.forward(x, h0, d.lengths);
      },
      d.x, d.h0, d.seed_z, d.seed_h, parameters_by_name(model));
}

// ---- the scan form computes the loop form's function ---------------------------------------

class LinearKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(LinearKinds, ScanEqualsLoopForwardAndBackward) {
  // One layer and full lengths; two layers with dropout and lengths ending inside the block
  // (one sequence empty).
  for (auto [layers, dropout, lens] :
       {std::tuple{int64_t(1), 0.0, std::vector<int64_t>{}},
        std::tuple{int64_t(2), 0.3, std::vector<int64_t>{13, 5, 0, 9}}}) {
    torch::manual_seed(2);
    auto model = make_model({GetParam(), 3, 5, layers, dropout});
    model->to(torch::kFloat64);
    const ScanData d(*model, lens);
    const auto ref = run_form(*model, RecurrenceForm::kLoop, d);
    const auto got = run_form(*model, RecurrenceForm::kScan, d);
    expect_close(got, ref, 1e-12, GetParam() + " L=" + std::to_string(layers) + " scan vs loop");
  }
}

TEST_P(LinearKinds, PastItsEndASequenceKeepsItsStateAndEmitsZeros) {
  torch::manual_seed(2);
  auto model = make_model({GetParam(), 3, 5, 1});
  model->to(torch::kFloat64);
  const ScanData d(*model, {13, 5, 0, 9});
  torch::NoGradGuard no_grad;
  auto [z, h] = model->forward(d.x, d.h0, d.lengths);
  EXPECT_TRUE(torch::isfinite(z).all().item<bool>());
  EXPECT_EQ(z.narrow(0, 5, 8).select(1, 1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(z.select(1, 2).abs().max().item<double>(), 0.0);
  // The exit state of sequence 1 is its state after step 5: run its 5 steps alone.
  std::vector<torch::Tensor> h0_one;
  for (const auto& t : d.h0) h0_one.push_back(t.narrow(1, 1, 1));
  auto [z_one, h_one] = model->forward(d.x.narrow(0, 0, 5).narrow(1, 1, 1), State(h0_one));
  for (size_t i = 0; i < h.size(); ++i) {
    EXPECT_LE(testing::rel_diff(h[i].narrow(1, 1, 1), h_one[i]), 1e-14);
    EXPECT_TRUE(torch::equal(h[i].narrow(1, 2, 1), d.h0[i].narrow(1, 2, 1)));  // length 0
  }
}

TEST_P(LinearKinds, DescribeNamesTheForm) {
  auto model = make_model({GetParam(), 3, 5, 1});
  EXPECT_NE(model->describe().find("form=scan"), std::string::npos) << model->describe();
  as_linear(*model).set_form(RecurrenceForm::kLoop);
  EXPECT_NE(model->describe().find("form=loop"), std::string::npos) << model->describe();
}

// ---- every exact method equals full BPTT by the step loop ----------------------------------

// The option values besides each method's defaults: blocks that divide T, do not, and
// exceed it.
std::vector<std::string> specs_of(const std::string& method, int64_t steps) {
  if (method == "vlrnn") {
    return {"vlrnn:block_length=1", "vlrnn:block_length=4", "vlrnn:block_length=" + std::to_string(steps + 3)};
  }
  if (method == "checkpoint") return {"checkpoint:segments=1", "checkpoint:segments=3"};
  return {method};
}

TEST_P(LinearKinds, EveryExactMethodEqualsFullBpttByTheStepLoop) {
  const int64_t steps = 11;
  for (auto [layers, dropout, lens] :
       {std::tuple{int64_t(1), 0.0, std::vector<int64_t>{}},
        std::tuple{int64_t(2), 0.3, std::vector<int64_t>{11, 4, 9, 1}}}) {
    torch::manual_seed(8);
    auto model = make_model({GetParam(), 3, 4, layers, dropout});
    model->to(torch::kFloat64);
    auto head = make_head("mse", 4, 2);
    head->to(torch::kFloat64);
    SequenceBatch batch;
    batch.inputs = torch::randn({steps, 4, 3}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
    batch.targets = torch::randn({steps, 4, 2}, torch::kFloat64);
    if (!lens.empty()) batch.lengths = torch::tensor(lens);
    std::vector<torch::Tensor> h0;
    for (const auto& spec : model->state_spec()) {
      h0.push_back(torch::randn(spec.shape_for_batch(4), torch::kFloat64).requires_grad_(true));
    }
    const Workload workload{*model, *head, batch, State(h0), Reduction::kMean};
    as_linear(*model).set_form(RecurrenceForm::kLoop);
    torch::manual_seed(1);
    const auto ref = verify::run_and_snapshot(*make_method("full"), workload);
    as_linear(*model).set_form(RecurrenceForm::kScan);
    int checked = 0;
    for (const auto& name : method_names()) {
      if (!handles_left_to_right(name)) continue;  // bivlrnn takes bidirectional models
      if (!make_method(name)->is_exact()) continue;
      for (const auto& spec : specs_of(name, steps)) {
        torch::manual_seed(1);
        const auto got = verify::run_and_snapshot(*make_method_from_spec(spec), workload);
        const auto diff = verify::compare(got, ref);
        EXPECT_LE(diff.max_rel, 1e-10) << GetParam() << " L=" << layers << " " << spec
                                       << ": worst " << diff.worst;
        ++checked;
      }
    }
    EXPECT_GE(checked, 5);
    std::cout << "[ checked  ] " << GetParam() << " L=" << layers << ": " << checked
              << " method specs against full BPTT by the step loop\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, LinearKinds, ::testing::ValuesIn(kKinds),
                         [](const auto& info) { return info.param; });

// ---- contract ------------------------------------------------------------------------------

TEST(LinearRecurrence, BadInputsNameTheArgument) {
  auto model = make_model({"mingru", 3, 5, 2});
  const auto h0 = model->initial_state(4, torch::dtype(torch::kFloat32));
  expect_error_mentions([&] { model->forward(torch::randn({6, 4, 2}), h0); }, {"x_block", "F = 3"});
  expect_error_mentions([&] { model->forward(torch::randn({6, 4, 3}), State{torch::zeros({1, 4, 5})}); },
                        {"h_entry", "[2, 4, 5]"});
  expect_error_mentions([&] { model->forward(torch::randn({6, 4, 3}), h0, torch::tensor({7, 1, 1, 1})); },
                        {"lengths", "[0, Tb]"});
  expect_error_mentions([] { make_model({"lru", 3, 5, 1, 1.5}); }, {"dropout", "1.5"});
}

}  // namespace
}  // namespace vlrnn
