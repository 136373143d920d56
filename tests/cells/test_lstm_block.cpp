#include "test_util.h"

#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/verify/compare.h"

#include <cmath>

// Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers.

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;
using testing::parameters_by_name;
using testing::rel_diff;
using testing::run_and_backprop;

std::string dtype_name(torch::ScalarType dtype) { return dtype == torch::kFloat64 ? "f64" : "f32"; }

// Inputs of one comparison: x [T, B, F], (h0, c0) [L, B, H], seeds of L.
struct LstmData {
  torch::Tensor x, seed_z;
  State h0;
  std::vector<torch::Tensor> seed_h;
  torch::Tensor lengths;  // [B] or undefined

  LstmData(torch::ScalarType dtype, int64_t layers, int64_t states, std::vector<int64_t> lens = {},
           int64_t steps = 9, int64_t batch = 4, int64_t input = 3, int64_t hidden = 5) {
    torch::manual_seed(31);
    const auto o = torch::dtype(dtype);
    x = torch::randn({steps, batch, input}, o);
    seed_z = torch::randn({steps, batch, hidden}, o);
    std::vector<torch::Tensor> h;
    for (int64_t i = 0; i < states; ++i) {
      h.push_back(torch::randn({layers, batch, hidden}, o));
      seed_h.push_back(torch::randn({layers, batch, hidden}, o));
    }
    h0 = State(h);
    if (!lens.empty()) {
      lengths = torch::tensor(lens);
      // Padding holds NaN: it must never reach an output or a gradient.
      x = x.masked_fill(step_mask(lengths, steps, torch::kCPU).logical_not().unsqueeze(2), NAN);
    }
  }
};

testing::ForwardFn forward_of(RecurrentModule& model, const torch::Tensor& lengths,
                              uint64_t rng_seed = 5) {
  return [&model, lengths, rng_seed](const torch::Tensor& x, const State& h0) {
    torch::manual_seed(rng_seed);  // the same dropout draws for both models
    return model.forward(x, h0, lengths);
  };
}

// Copies `from`'s parameters into `to` by name, and checks that the names are the same.
void copy_by_name(const torch::nn::Module& from, torch::nn::Module& to) {
  const auto src = parameters_by_name(from);
  const auto dst = parameters_by_name(to);
  ASSERT_EQ(src.size(), dst.size());
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : src) {
    ASSERT_TRUE(dst.count(name)) << "parameter " << name << " missing";
    const_cast<torch::Tensor&>(dst.at(name)).copy_(p);
  }
}

// ---- equal to torch::nn::LSTM with the same weights -----------------------------------------

class LibTorchLstm : public ::testing::TestWithParam<std::tuple<int64_t, torch::ScalarType, LstmSave>> {};

TEST_P(LibTorchLstm, OutputsStatesAndEveryGradientEqual) {
  const auto [layers, dtype, save] = GetParam();
  torch::manual_seed(5);
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(3, 5).num_layers(layers));
  lstm->to(dtype);
  LstmBlock block(3, 5, layers, 0.0, save);
  block.to(dtype);
  block.copy_weights_from(lstm);
  const LstmData d(dtype, layers, 2);
  Named lstm_params;
  for (const auto& [name, p] : parameters_by_name(*lstm)) lstm_params["lstm." + name] = p;
  const auto ref = run_and_backprop(
      [&](const torch::Tensor& x, const State& h0) {
        auto [z, hc] = lstm->forward(x, std::make_tuple(h0[0], h0[1]));
        return std::make_pair(z, State{std::get<0>(hc), std::get<1>(hc)});
      },
      d.x, d.h0, d.seed_z, d.seed_h, lstm_params);
  const auto got = run_and_backprop(forward_of(block, {}), d.x, d.h0, d.seed_z, d.seed_h,
                                    parameters_by_name(block));
  EXPECT_EQ(ref.size(), got.size());  // same names: every parameter compared
  expect_close(got, ref, verify::tolerance_for(dtype),
               "lstm_block L=" + std::to_string(layers) + " " + dtype_name(dtype) + " " +
                   to_string(save) + " vs torch::nn::LSTM");
}

INSTANTIATE_TEST_SUITE_P(
    Layers, LibTorchLstm,
    ::testing::Combine(::testing::Values(int64_t{1}, int64_t{2}, int64_t{3}), ::testing::Values(torch::kFloat64, torch::kFloat32),
                       ::testing::Values(LstmSave::kGates, LstmSave::kPreactivations)),
    [](const auto& info) {
      return "L" + std::to_string(std::get<0>(info.param)) + "_" +
             dtype_name(std::get<1>(info.param)) + "_" + to_string(std::get<2>(info.param));
    });

// ---- equal to the built-in "lstm" kind: lengths, NaN padding, dropout ----------------------

struct BuiltInCase {
  int64_t layers;
  double dropout;
  torch::ScalarType dtype;
  bool lengths;
};

class BuiltInLstm : public ::testing::TestWithParam<BuiltInCase> {};

TEST_P(BuiltInLstm, EqualsTheBuiltInLstmKind) {
  const auto c = GetParam();
  torch::manual_seed(3);
  auto builtin = make_model({"lstm", 3, 5, c.layers, c.dropout});
  auto block = make_model({"lstm_block", 3, 5, c.layers, c.dropout});
  builtin->to(c.dtype);
  block->to(c.dtype);
  copy_by_name(*builtin, *block);
  // Lengths: full, ends inside, 0 steps, 1 step.
  const LstmData d(c.dtype, c.layers, 2,
                   c.lengths ? std::vector<int64_t>{9, 4, 0, 1} : std::vector<int64_t>{});
  const auto ref = run_and_backprop(forward_of(*builtin, d.lengths), d.x, d.h0, d.seed_z,
                                    d.seed_h, parameters_by_name(*builtin));
  const auto got = run_and_backprop(forward_of(*block, d.lengths), d.x, d.h0, d.seed_z, d.seed_h,
                                    parameters_by_name(*block));
  for (const auto& [name, t] : got) {
    EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name << " holds nan or inf";
  }
  expect_close(got, ref, verify::tolerance_for(c.dtype),
               "lstm_block L=" + std::to_string(c.layers) + " dropout " +
                   std::to_string(c.dropout) + " " + dtype_name(c.dtype) +
                   (c.lengths ? " lengths" : " full") + " vs built-in lstm");
}

std::vector<BuiltInCase> builtin_cases() {
  std::vector<BuiltInCase> cases;
  for (int64_t layers : {1, 2, 3}) {
    for (double dropout : {0.0, 0.3}) {
      if (layers == 1 && dropout > 0) continue;
      for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
        for (bool lengths : {false, true}) cases.push_back({layers, dropout, dtype, lengths});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, BuiltInLstm, ::testing::ValuesIn(builtin_cases()),
                         [](const auto& info) {
                           const auto& c = info.param;
                           return "L" + std::to_string(c.layers) + (c.dropout > 0 ? "_dropout" : "") +
                                  "_" + dtype_name(c.dtype) + (c.lengths ? "_lengths" : "_full");
                         });

TEST(LstmBlock, BackwardInSeveralChunksEqualsTheBuiltInLstm) {
  // H = 256, B = 32: backward chunks of 4M / (4H * B) = 128 steps; T = 300 makes 3 chunks,
  // the first one short, with lengths ending inside each of them.
  torch::manual_seed(12);
  const int64_t steps = 300, batch = 32, hidden = 256;
  auto builtin = make_model({"lstm", 3, hidden, 1});
  auto block = make_model({"lstm_block", 3, hidden, 1});
  builtin->to(torch::kFloat64);
  block->to(torch::kFloat64);
  copy_by_name(*builtin, *block);
  const auto o = torch::dtype(torch::kFloat64);
  auto lengths = torch::randint(1, steps + 1, {batch}, torch::kLong);
  lengths[0] = steps;
  lengths[1] = 100;
  lengths[2] = 250;
  auto x = torch::randn({steps, batch, 3}, o)
               .masked_fill(step_mask(lengths, steps, torch::kCPU).logical_not().unsqueeze(2), NAN);
  const State h0{torch::randn({1, batch, hidden}, o), torch::randn({1, batch, hidden}, o)};
  const auto seed_z = torch::randn({steps, batch, hidden}, o);
  const std::vector<torch::Tensor> seed_h{torch::randn({1, batch, hidden}, o),
                                          torch::randn({1, batch, hidden}, o)};
  expect_close(run_and_backprop(forward_of(*block, lengths), x, h0, seed_z, seed_h,
                                parameters_by_name(*block)),
               run_and_backprop(forward_of(*builtin, lengths), x, h0, seed_z, seed_h,
                                parameters_by_name(*builtin)),
               1e-10, "lstm_block T=300 (3 backward chunks) f64 lengths vs built-in lstm");
}

TEST(LstmBlock, TheSameSeedGivesTheBuiltInModelsWeights) {
  for (double dropout : {0.0, 0.2}) {
    torch::manual_seed(9);
    auto builtin = make_model({"lstm", 3, 5, 2, dropout});
    torch::manual_seed(9);
    auto block = make_model({"lstm_block", 3, 5, 2, dropout});
    const auto a = parameters_by_name(*builtin), b = parameters_by_name(*block);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, p] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      EXPECT_TRUE(torch::equal(p, b.at(name))) << name;
    }
  }
}

TEST(LstmBlock, OverGivenTensorsSharesThemAndComputesTheSameFunction) {
  // A Python module's parameters (vlrnn.nn.LSTM): the model runs on them, so their .grad
  // is where the gradients go; without biases, zeros stand in and are not parameters.
  torch::manual_seed(3);
  LstmBlock owner(3, 5, 2, 0.3);
  std::vector<std::vector<torch::Tensor>> layers;
  for (int64_t l = 0; l < 2; ++l) {
    const auto w = owner.weights(l);
    layers.push_back({w.w_ih, w.w_hh, w.b_ih, w.b_hh});
  }
  LstmBlock shared(layers, 0.3);
  EXPECT_EQ(shared.parameters().size(), 8u);
  EXPECT_TRUE(shared.named_parameters().contains("weight_hh_l1"));
  EXPECT_TRUE(shared.weights(1).w_hh.is_same(owner.weights(1).w_hh));
  const auto x = torch::randn({6, 2, 3});  // [Tb, B, F]
  const auto lengths = torch::tensor(std::vector<int64_t>{6, 4});
  const auto masks = torch::bernoulli(torch::full({6, 1, 2, 5}, 0.7)).div_(0.7);  // [Tb, L-1, B, H]
  const auto [z_own, h_own] = owner.forward_with_masks(x, owner.initial_state(2, {}), lengths, masks);
  z_own.sum().backward();
  const auto grad = owner.weights(0).w_ih.grad().clone();
  owner.weights(0).w_ih.mutable_grad().zero_();
  const auto [z_shared, h_shared] =
      shared.forward_with_masks(x, shared.initial_state(2, {}), lengths, masks);
  z_shared.sum().backward();
  EXPECT_TRUE(torch::equal(z_own, z_shared));
  EXPECT_TRUE(torch::equal(owner.weights(0).w_ih.grad(), grad));

  std::vector<std::vector<torch::Tensor>> no_biases{{layers[0][0], layers[0][1]}};
  LstmBlock unbiased(no_biases, 0.0);
  EXPECT_EQ(unbiased.parameters().size(), 2u);
  EXPECT_EQ(unbiased.weights(0).b_ih.abs().sum().item<double>(), 0.0);
  expect_error_mentions([&] { LstmBlock({{layers[0][0]}}, 0.0); },
                        {"layers[0]", "(w_ih, w_hh)", "got 1"});
  expect_error_mentions([&] { LstmBlock({layers[0], layers[0]}, 0.0); },
                        {"layers[1]", "w_ih [20, 5]", "[20, 3]"});
  expect_error_mentions([&] { LstmBlock({layers[0], no_biases[0]}, 0.0); },
                        {"layers[1]", "expected 4 tensors", "got 2"});
  expect_error_mentions(
      [&] { shared.forward_with_masks(x, shared.initial_state(2, {}), {}, masks.narrow(0, 0, 2)); },
      {"masks", "[6, 1, 2, 5]", "[2, 1, 2, 5]"});
}

TEST(LstmBlock, BothSaveModesComputeTheSameNumbers) {
  const LstmData d(torch::kFloat64, 2, 2, {9, 3, 7, 0});
  torch::manual_seed(4);
  LstmBlock gates(3, 5, 2, 0.0, LstmSave::kGates);
  LstmBlock pre(3, 5, 2, 0.0, LstmSave::kPreactivations);
  gates.to(torch::kFloat64);
  pre.to(torch::kFloat64);
  copy_by_name(gates, pre);
  expect_close(run_and_backprop(forward_of(pre, d.lengths), d.x, d.h0, d.seed_z, d.seed_h,
                                parameters_by_name(pre)),
               run_and_backprop(forward_of(gates, d.lengths), d.x, d.h0, d.seed_z, d.seed_h,
                                parameters_by_name(gates)),
               1e-13, "lstm_block preactivations vs gates");
}

TEST(LstmBlock, GateLoopsOnTwoThreadsComputeTheSameNumbers) {
  // The gate loops split the batch's rows into tasks of 16384 / H rows: B = 64 at H = 512 is
  // two tasks, each its rows' own work, so two threads compute what one does. (LibTorch's own
  // reductions may sum in another order on two threads: equal to rounding, not bit for bit.)
  const int64_t hidden = 512, batch = 64;
  std::vector<int64_t> lengths(batch, 6);
  lengths[0] = 2;
  lengths[batch - 1] = 0;
  for (auto save : {LstmSave::kGates, LstmSave::kPreactivations}) {
    const LstmData d(torch::kFloat64, 1, 2, lengths, 6, batch, 3, hidden);
    torch::manual_seed(4);
    LstmBlock model(3, hidden, 1, 0.0, save);
    model.to(torch::kFloat64);
    const auto run = [&] {
      return run_and_backprop(forward_of(model, d.lengths), d.x, d.h0, d.seed_z, d.seed_h,
                              parameters_by_name(model));
    };
    const auto one = run();
    testing::IntraOpThreads two_threads(2);
    expect_close(run(), one, 1e-13, "lstm_block on 2 threads vs 1");
  }
}

// NOTE [ lstm_block off the CPU ]: other devices run the gate work as LibTorch ops; run on the
// CPU here, they compute what the loops do, frozen steps and NaN padding included.
TEST(LstmBlock, TheGateOpsOfOtherDevicesComputeWhatTheCpuLoopsDo) {
  struct OpsOnTheCpu {
    OpsOnTheCpu() { set_lstm_layer_cpu_loops_for_testing(false); }
    ~OpsOnTheCpu() { set_lstm_layer_cpu_loops_for_testing(true); }
  };
  const LstmData d(torch::kFloat64, 2, 2, {9, 3, 7, 0});
  for (auto save : {LstmSave::kGates, LstmSave::kPreactivations}) {
    torch::manual_seed(4);
    LstmBlock model(3, 5, 2, 0.0, save);
    model.to(torch::kFloat64);
    const auto run = [&] {
      return run_and_backprop(forward_of(model, d.lengths), d.x, d.h0, d.seed_z, d.seed_h,
                              parameters_by_name(model));
    };
    const auto loops = run();
    OpsOnTheCpu ops;
    expect_close(run(), loops, 1e-12, "lstm_block gate ops vs loops, save=" + to_string(save));
    auto [z, h] = model.forward(d.x, d.h0, d.lengths);
    EXPECT_TRUE(torch::equal(h[1].narrow(1, 3, 1), d.h0[1].narrow(1, 3, 1)));  // no step: frozen
    EXPECT_EQ(z.narrow(1, 3, 1).abs().max().item<double>(), 0.0);
  }
}

TEST(LstmBlock, StateIsFrozenAndOutputIsZeroPastTheEnd) {
  const LstmData d(torch::kFloat64, 1, 2, {9, 4, 0, 1});
  LstmBlock model(3, 5);
  model.to(torch::kFloat64);
  auto [z, h] = model.forward(d.x, d.h0, d.lengths);
  // Sequence 2 has no step: its state passes through bit-exactly and z is 0.
  EXPECT_TRUE(torch::equal(h[0].narrow(1, 2, 1), d.h0[0].narrow(1, 2, 1)));
  EXPECT_TRUE(torch::equal(h[1].narrow(1, 2, 1), d.h0[1].narrow(1, 2, 1)));
  EXPECT_EQ(z.narrow(1, 2, 1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(z.narrow(1, 1, 1).narrow(0, 4, 5).abs().max().item<double>(), 0.0);
  // Sequence 1's exit state is its state after step 4.
  auto [z4, h4] = model.forward(d.x.narrow(0, 0, 4).narrow(1, 1, 1),
                                State{d.h0[0].narrow(1, 1, 1), d.h0[1].narrow(1, 1, 1)});
  EXPECT_LE(rel_diff(h[1].narrow(1, 1, 1), h4[1]), 1e-12);
}

// ---- under the gradient methods ------------------------------------------------------------

TEST(LstmBlock, VlrnnEqualsFullBpttWithLengthsAndDropout) {
  // Blocks of K = 4 over T = 11, lengths ending inside, at and before block boundaries,
  // 3 layers with dropout between them: exact only if the masks are drawn per step.
  torch::manual_seed(8);
  auto model = make_model({"lstm_block", 3, 4, 3, 0.3});
  model->to(torch::kFloat64);
  auto head = make_head("ce", 4, 3);
  head->to(torch::kFloat64);
  SequenceBatch batch;
  batch.inputs = torch::randn({11, 4, 3}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
  batch.targets = torch::randint(0, 3, {11, 4}, torch::kLong);
  batch.lengths = torch::tensor(std::vector<int64_t>{11, 4, 9, 1});
  const State h0{torch::randn({3, 4, 4}, torch::kFloat64).requires_grad_(true),
                 torch::randn({3, 4, 4}, torch::kFloat64).requires_grad_(true)};
  const Workload workload{*model, *head, batch, h0, Reduction::kMean};
  auto full = make_method("full");
  torch::manual_seed(1);
  const auto ref = verify::run_and_snapshot(*full, workload);
  for (const char* spec : {"vlrnn:block_length=4", "vlrnn:block_length=1", "checkpoint:segments=3"}) {
    auto method = make_method_from_spec(spec);
    torch::manual_seed(1);
    const auto got = verify::run_and_snapshot(*method, workload);
    const auto diff = verify::compare(got, ref);
    std::cout << "[ maxdiff  ] lstm_block " << spec << " vs full: " << diff.max_rel << " ("
              << diff.worst << ")\n";
    EXPECT_LE(diff.max_rel, 1e-10) << spec << ": worst " << diff.worst;
  }
}

// ---- contract ------------------------------------------------------------------------------

TEST(LstmBlock, RegisteredAsAModelKindWithTheBuiltInStateLayout) {
  const auto kinds = model_kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "lstm_block"), kinds.end());
  auto model = make_model({"lstm_block", 3, 4, 2, 0.1});
  ASSERT_NE(dynamic_cast<LstmBlock*>(model.get()), nullptr);
  const auto spec = model->state_spec();
  const auto builtin = make_model({"lstm", 3, 4, 2, 0.1})->state_spec();
  ASSERT_EQ(spec.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(spec[i].name, builtin[i].name);
    EXPECT_EQ(spec[i].shape_for_batch(5), builtin[i].shape_for_batch(5));
  }
}

TEST(LstmBlock, DoubleBackwardIsRejected) {
  // The cells' backward: float64, which oneDNN does not run (NOTE [ The LSTM layer oneDNN
  // runs ] in vlrnn/cells/onednn_lstm.h; ATen differentiates its own backward).
  LstmBlock model(3, 4);
  model.to(torch::kFloat64);
  auto x = torch::randn({5, 2, 3}, torch::kFloat64).requires_grad_(true);
  auto [z, h] = model.forward(x, model.initial_state(2, x.options()));
  auto loss = z.sum();
  expect_error_mentions(
      [&] { torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true); },
      {"lstm_block", "double backward", "create_graph"});
}

TEST(LstmBlock, OnlyWhatRequiresGradGetsAGradient) {
  LstmBlock model(3, 4);
  const auto w = model.weights();
  auto h0 = torch::zeros({1, 2, 4}).requires_grad_(true);
  auto x = torch::randn({5, 2, 3});
  auto [z, h, c] = lstm_layer(x, h0, torch::zeros({1, 2, 4}),
                              {w.w_ih.detach(), w.w_hh.detach(), w.b_ih.detach(), w.b_hh.detach()});
  (z.sum() + c.sum()).backward();
  EXPECT_TRUE(h0.grad().defined());
  EXPECT_FALSE(w.w_hh.grad().defined());
}

TEST(LstmBlock, BadInputsAreRejectedNamingTheArgument) {
  LstmBlock model(3, 4, 2);
  const auto x = torch::randn({5, 2, 3});  // [Tb, B, F]
  const auto state = model.initial_state(2, {});
  expect_error_mentions([&] { model.forward(torch::randn({5, 2, 2}), state); },
                        {"x_block", "F = 3", "[5, 2, 2]"});
  expect_error_mentions([&] { model.forward(x, State{state[0]}); },
                        {"h_entry", "2 tensor(s)", "got 1"});
  expect_error_mentions([&] { model.forward(x, State{state[0], torch::zeros({1, 2, 4})}); },
                        {"h_entry (c)", "[L, B, H] = [2, 2, 4]", "[1, 2, 4]"});
  expect_error_mentions([&] { model.forward(x, state, torch::tensor(std::vector<int64_t>{5, 6})); },
                        {"lengths", "[0, Tb] = [0, 5]", "[5, 6]"});
  expect_error_mentions([&] { model.forward(x.to(torch::kFloat64), state); },
                        {"x", "Float", "Double"});
  const auto w = model.weights(1);
  expect_error_mentions([&] { lstm_layer(x, state[0].narrow(0, 0, 1), state[1].narrow(0, 0, 1), w); },
                        {"x", "F = 4", "[5, 2, 3]"});
  expect_error_mentions(
      [&] { lstm_layer(x, state[0], state[1].narrow(0, 0, 1), model.weights(0)); },
      {"h_entry", "[1, B, H] = [1, 2, 4]", "[2, 2, 4]"});
  expect_error_mentions([&] { LstmWeights{w.w_ih, w.w_hh.narrow(0, 0, 12), w.b_ih, w.b_hh}.check("w"); },
                        {"w.w_hh", "[4H, H]", "[12, 4]"});
  torch::nn::LSTM one_layer(torch::nn::LSTMOptions(3, 4));
  expect_error_mentions([&] { model.copy_weights_from(one_layer); },
                        {"lstm", "num_layers = 2", "num_layers = 1"});
  expect_error_mentions([] { make_model({"lstm_block", 3, 4, 0}); }, {"num_layers", ">= 1", "got 0"});
  expect_error_mentions([] { make_model({"lstm_block", 3, 4, 2, 1.0}); },
                        {"dropout", "[0, 1)", "got 1"});
}

}  // namespace
}  // namespace vlrnn
