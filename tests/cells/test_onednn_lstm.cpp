#include "test_util.h"

#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/onednn_lstm.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/verify/compare.h"

#include <ATen/Context.h>
#include <torch/version.h>

// Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers.

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;
using testing::parameters_by_name;
using testing::run_and_backprop;

// PyTorch's own oneDNN switch set to `enabled` while it lives, then back to what it was.
struct OneDnnSwitch {
  explicit OneDnnSwitch(bool enabled) : saved(at::globalContext().userEnabledMkldnn()) {
    at::globalContext().setUserEnabledMkldnn(enabled);
  }
  ~OneDnnSwitch() { at::globalContext().setUserEnabledMkldnn(saved); }
  OneDnnSwitch(const OneDnnSwitch&) = delete;
  OneDnnSwitch& operator=(const OneDnnSwitch&) = delete;
  bool saved;
};

bool built_with_onednn_rnn_layer() {
  return (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)) &&
         at::hasMKLDNN();
}

TEST(OneDnnLstm, RunsInFloat32OnTheCpuWherePyTorchHasIt) {
  const auto f32 = torch::zeros({2, 1, 3}), f64 = torch::zeros({2, 1, 3}, torch::kFloat64);
  EXPECT_EQ(onednn_runs_lstm(f32), built_with_onednn_rnn_layer() && onednn_lstm_inference_agrees())
      << "PyTorch " << TORCH_VERSION << ", hasMKLDNN " << at::hasMKLDNN();
  EXPECT_FALSE(onednn_runs_lstm(f64));  // the primitive has no float64
  OneDnnSwitch off(false);
  EXPECT_FALSE(onednn_runs_lstm(f32));  // the user's switch is honoured
}

// The probe's verdict for the test's length, then the probe's own again.
struct InferenceVerdict {
  explicit InferenceVerdict(bool agrees) { set_onednn_lstm_inference_verdict_for_testing(agrees); }
  ~InferenceVerdict() { set_onednn_lstm_inference_verdict_for_testing(c10::nullopt); }
  InferenceVerdict(const InferenceVerdict&) = delete;
  InferenceVerdict& operator=(const InferenceVerdict&) = delete;
};

// NOTE [ oneDNN's LSTM inference, checked ]: where inference disagrees, a gradient method's
// call runs with oneDNN off and gives the switch back after; float64, another device, an
// agreeing oneDNN or a user's own "off" leave it alone.
TEST(OneDnnLstmGuard, SwitchesOneDnnOffOnlyWhereInferenceDisagrees) {
  if (!at::hasMKLDNN()) GTEST_SKIP() << "this LibTorch has no oneDNN";
  OneDnnSwitch on(true);
  const auto f32 = torch::zeros({2, 1, 3}), f64 = torch::zeros({2, 1, 3}, torch::kFloat64);
  {
    InferenceVerdict disagrees(false);
    EXPECT_FALSE(onednn_runs_lstm(f32));  // LstmBlock runs its own cell
    {
      OneDnnLstmGuard guard(f32);
      EXPECT_TRUE(guard.switched_off());
      EXPECT_FALSE(at::globalContext().userEnabledMkldnn());
    }
    EXPECT_TRUE(at::globalContext().userEnabledMkldnn());
    EXPECT_FALSE(OneDnnLstmGuard(f64).switched_off());
    OneDnnSwitch off(false);
    EXPECT_FALSE(OneDnnLstmGuard(f32).switched_off());
    EXPECT_FALSE(at::globalContext().userEnabledMkldnn());  // the user's "off" stays
  }
  InferenceVerdict agrees(true);
  EXPECT_FALSE(OneDnnLstmGuard(f32).switched_off());
  EXPECT_EQ(onednn_runs_lstm(f32), built_with_onednn_rnn_layer());
}

// The model sees oneDNN off in every call a method makes (no-grad and training passes
// alike), and the switch is back on after, also when the method throws.
class RecordsOneDnnSwitch : public RecurrentModule {
 public:
  explicit RecordsOneDnnSwitch(std::shared_ptr<RecurrentModule> inner)
      : inner_(register_module("inner", inner)) {}
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h,
                                          const torch::Tensor& lengths) override {
    seen.push_back(at::globalContext().userEnabledMkldnn());
    return inner_->forward(x, h, lengths);
  }
  int64_t input_size() const override { return inner_->input_size(); }
  int64_t output_size() const override { return inner_->output_size(); }
  std::vector<StateSpec> state_spec() const override { return inner_->state_spec(); }
  std::vector<bool> seen;

 private:
  std::shared_ptr<RecurrentModule> inner_;
};

TEST(OneDnnLstmGuard, AMethodsCallRunsWithoutOneDnnWhereInferenceDisagrees) {
  if (!at::hasMKLDNN()) GTEST_SKIP() << "this LibTorch has no oneDNN";
  OneDnnSwitch on(true);
  InferenceVerdict disagrees(false);
  testing::SmallProblem problem("lstm", 12, 2, torch::kFloat32);
  auto recording = std::make_shared<RecordsOneDnnSwitch>(problem.model);
  Workload workload{*recording, *problem.head, problem.batch, {}, Reduction::kMean};
  make_method_from_spec("vlrnn:block_length=4")->compute(workload);
  ASSERT_GE(recording->seen.size(), 5u);  // 3 blocks: 2 no-grad passes, 3 with grad
  for (bool on_in_call : recording->seen) EXPECT_FALSE(on_in_call);
  EXPECT_TRUE(at::globalContext().userEnabledMkldnn());
}

// LstmBlock (L = 2, T = 7, B = 6) on oneDNN equals LstmBlock on the hand-written cells (the
// switch off), layer by layer, the same dropout masks, every gradient, to float32's
// tolerance. `lengths` [B] or undefined; padding holds NaN.
void expect_onednn_equals_the_cells(double dropout, const torch::Tensor& lengths,
                                    const std::string& what) {
  torch::manual_seed(6);
  LstmBlock model(3, 6, /*num_layers=*/2, dropout);
  auto x = torch::randn({7, 6, 3});
  if (lengths.defined()) {
    x = x.masked_fill(step_mask(lengths, 7, torch::kCPU).logical_not().unsqueeze(2), NAN);
  }
  const State h0{torch::randn({2, 6, 6}), torch::randn({2, 6, 6})};
  const auto seed_z = torch::randn({7, 6, 6});
  const std::vector<torch::Tensor> seed_h{torch::randn({2, 6, 6}), torch::randn({2, 6, 6})};
  const auto run = [&] {
    return run_and_backprop(
        [&](const torch::Tensor& xl, const State& hl) {
          torch::manual_seed(9);  // the same dropout masks on both runs
          return model.forward(xl, hl, lengths);
        },
        x, h0, seed_z, seed_h, parameters_by_name(model));
  };
  const auto on_onednn = run();
  OneDnnSwitch off(false);
  const auto on_cells = run();
  EXPECT_EQ(on_onednn.size(), on_cells.size());
  expect_close(on_onednn, on_cells, verify::tolerance_for(torch::kFloat32),
               "lstm_block on oneDNN vs on the cells, " + what);
}

TEST(OneDnnLstm, LstmBlockEqualsTheCellsWithEveryGradient) {
  if (!onednn_runs_lstm(torch::zeros({1}))) GTEST_SKIP() << "no oneDNN RNN layer in this PyTorch";
  expect_onednn_equals_the_cells(0.0, {}, "no dropout");
  expect_onednn_equals_the_cells(0.3, {}, "dropout 0.3");
}

// Lengths that end inside the block, unsorted, one of 0 steps: the calls in segments (NOTE
// [ Variable lengths on oneDNN ]) equal the cell's masked steps.
TEST(OneDnnLstm, WithLengthsEqualsTheCells) {
  if (!onednn_runs_lstm(torch::zeros({1}))) GTEST_SKIP() << "no oneDNN RNN layer in this PyTorch";
  const auto lengths = torch::tensor({7, 3, 0, 5, 7, 3});
  expect_onednn_equals_the_cells(0.3, lengths, "lengths, dropout 0.3");
  // The sequence of 0 steps: its state passes through bit for bit, its output is 0.
  LstmBlock model(3, 6);
  const State h0{torch::randn({1, 6, 6}), torch::randn({1, 6, 6})};
  torch::NoGradGuard no_grad;
  auto [z, h] = model.forward(torch::randn({7, 6, 3}), h0, lengths);
  EXPECT_TRUE(torch::equal(h[0].narrow(1, 2, 1), h0[0].narrow(1, 2, 1)));
  EXPECT_TRUE(torch::equal(h[1].narrow(1, 2, 1), h0[1].narrow(1, 2, 1)));
  EXPECT_EQ(z.narrow(1, 2, 1).abs().max().item<double>(), 0.0);
}

TEST(OneDnnLstm, WithoutGradItKeepsNoGraph) {
  if (!onednn_runs_lstm(torch::zeros({1}))) GTEST_SKIP() << "no oneDNN RNN layer in this PyTorch";
  LstmBlock model(3, 6);
  torch::NoGradGuard no_grad;
  auto [z, h] = model.forward(torch::randn({5, 2, 3}), model.initial_state(2, {}));
  EXPECT_FALSE(z.requires_grad());
  EXPECT_FALSE(h[0].requires_grad() || h[1].requires_grad());
}

// The output's autograd node: oneDNN's layer, or the cells' block function.
std::string output_node(const std::string& kind) {
  torch::manual_seed(2);
  auto model = make_model({kind, 3, 6, 2});
  auto [z, h] = model->forward(torch::randn({5, 2, 3}), model->initial_state(2, {}));
  return z.grad_fn() ? z.grad_fn()->name() : "none";
}

// "lstm_cells" runs the hand-written cells even where oneDNN would run "lstm_block"'s layers,
// with the same numbers as lstm_block with torch's switch off.
TEST(OneDnnLstm, LstmCellsRunsTheCellsEvenWhereOneDnnRuns) {
  auto cells = make_model({"lstm_cells", 3, 6, 2, 0.3});
  const auto* block = dynamic_cast<const LstmBlock*>(cells.get());
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->runner(), LstmRunner::kCells);
  EXPECT_NE(cells->describe().find("runner=cells"), std::string::npos) << cells->describe();
  const auto cells_node = output_node("lstm_cells");
  EXPECT_EQ(cells_node.find("Mkldnn"), std::string::npos) << cells_node;
  if (onednn_runs_lstm(torch::zeros({1}))) {
    const auto block_node = output_node("lstm_block");
    EXPECT_NE(block_node.find("Mkldnn"), std::string::npos) << block_node;
  }
  const auto x = torch::randn({7, 3, 3});
  const auto run = [&](RecurrentModule& model) {
    torch::manual_seed(9);  // the same dropout masks
    return model.forward(x, model.initial_state(3, {})).first;
  };
  auto on_cells = run(*cells);
  OneDnnSwitch off(false);
  EXPECT_TRUE(torch::equal(on_cells, run(*cells)));
}

TEST(OneDnnLstm, BadInputsAreRejectedNamingTheArgument) {
  torch::manual_seed(1);
  LstmBlock model(3, 6);
  const auto w = model.weights(0);
  const auto h = torch::zeros({1, 2, 6});
  expect_error_mentions(
      [&] { onednn_lstm_layer(torch::zeros({4, 2, 3}, torch::kFloat64), h, h, w); },
      {"x", "oneDNN runs no LSTM layer", "Double"});
  if (!onednn_runs_lstm(torch::zeros({1}))) return;
  const auto x = torch::zeros({4, 2, 3});
  expect_error_mentions([&] { onednn_lstm_layer(x, h.to(torch::kFloat64), h, w); },
                        {"h_entry", "Float", "Double"});
  expect_error_mentions([&] { onednn_lstm_layer(x, h, torch::zeros({1, 3, 6}), w); },
                        {"c_entry", "[1, 2, 6]", "[1, 3, 6]"});
  auto gap = torch::ones({4, 2}, torch::kBool);
  gap[1][0] = false;  // sequence 0: steps 0, 2, 3 valid, not a prefix
  expect_error_mentions([&] { onednn_lstm_layer(x, h, h, w, gap); },
                        {"mask", "valid step after an invalid one"});
  expect_error_mentions([&] { onednn_lstm_layer(x, h, h, w, torch::ones({4, 3}, torch::kBool)); },
                        {"mask", "[4, 2]", "[4, 3]"});
}

}  // namespace
}  // namespace vlrnn
