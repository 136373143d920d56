#include "test_util.h"

#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/onednn_lstm.h"
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
  EXPECT_EQ(onednn_runs_lstm(f32), built_with_onednn_rnn_layer())
      << "PyTorch " << TORCH_VERSION << ", hasMKLDNN " << at::hasMKLDNN();
  EXPECT_FALSE(onednn_runs_lstm(f64));  // the primitive has no float64
  OneDnnSwitch off(false);
  EXPECT_FALSE(onednn_runs_lstm(f32));  // the user's switch is honoured
}

// Layer by layer, with dropout drawn between them and every gradient: LstmBlock on oneDNN
// equals LstmBlock on the hand-written cells (the switch off), to float32's tolerance.
TEST(OneDnnLstm, LstmBlockEqualsTheCellsWithEveryGradient) {
  if (!onednn_runs_lstm(torch::zeros({1}))) GTEST_SKIP() << "no oneDNN RNN layer in this PyTorch";
  for (const double dropout : {0.0, 0.3}) {
    torch::manual_seed(5);
    LstmBlock model(3, 6, /*num_layers=*/2, dropout);
    const auto x = torch::randn({7, 4, 3});
    const State h0{torch::randn({2, 4, 6}), torch::randn({2, 4, 6})};
    const auto seed_z = torch::randn({7, 4, 6});
    const std::vector<torch::Tensor> seed_h{torch::randn({2, 4, 6}), torch::randn({2, 4, 6})};
    const auto run = [&] {
      return run_and_backprop(
          [&](const torch::Tensor& xl, const State& hl) {
            torch::manual_seed(9);  // the same dropout masks on both runs
            return model.forward(xl, hl);
          },
          x, h0, seed_z, seed_h, parameters_by_name(model));
    };
    const auto on_onednn = run();
    Named on_cells;
    {
      OneDnnSwitch off(false);
      on_cells = run();
    }
    EXPECT_EQ(on_onednn.size(), on_cells.size());
    expect_close(on_onednn, on_cells, verify::tolerance_for(torch::kFloat32),
                 "lstm_block on oneDNN vs on the cells, dropout " + std::to_string(dropout));
  }
}

TEST(OneDnnLstm, WithoutGradItKeepsNoGraph) {
  if (!onednn_runs_lstm(torch::zeros({1}))) GTEST_SKIP() << "no oneDNN RNN layer in this PyTorch";
  LstmBlock model(3, 6);
  torch::NoGradGuard no_grad;
  auto [z, h] = model.forward(torch::randn({5, 2, 3}), model.initial_state(2, {}));
  EXPECT_FALSE(z.requires_grad());
  EXPECT_FALSE(h[0].requires_grad() || h[1].requires_grad());
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
                        {"h_entry", "[1, 2, 6]", "Double"});
  expect_error_mentions([&] { onednn_lstm_layer(x, h, torch::zeros({1, 3, 6}), w); },
                        {"c_entry", "[1, 2, 6]", "[1, 3, 6]"});
}

}  // namespace
}  // namespace vlrnn
