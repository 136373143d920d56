// The bidirectional model kinds (vlrnn/core/bidirectional.h): bilstm against LibTorch's own
// LSTM(bidirectional=true) with copied weights, the backward direction cut anywhere, the
// state layout, and the refusals of the methods that cut the sequence.
#include "test_util.h"

#include "vlrnn/core/bidirectional.h"

namespace vlrnn {
namespace {

namespace rnn_utils = torch::nn::utils::rnn;
using testing::expect_error_mentions;

// Shape legend: T = time, B = batch, F = input features, H = hidden, L = layers.
constexpr int64_t T = 11, B = 4, F = 3, H = 5, L = 2;

// Our bilstm's parameter for LibTorch's bidirectional LSTM parameter `name`
// ("weight_ih_l1_reverse" -> "bwd_l1.lstm.weight_ih_l0").
std::string our_name(std::string name) {
  const std::string reverse = "_reverse";
  const bool backward = name.size() > reverse.size() &&
                        name.compare(name.size() - reverse.size(), reverse.size(), reverse) == 0;
  if (backward) name.resize(name.size() - reverse.size());
  const auto at = name.rfind("_l");
  const std::string layer = name.substr(at + 2);
  return (backward ? "bwd_l" : "fwd_l") + layer + ".lstm." + name.substr(0, at) + "_l0";
}

class AgainstLibTorch : public ::testing::TestWithParam<bool> {};

// Full BPTT on bilstm equals autograd through torch::nn::LSTM(bidirectional=true) (packed
// with the lengths when they vary): outputs' loss, final state and the gradients of every
// weight, of h0 and of x, in float64.
TEST_P(AgainstLibTorch, BilstmFullBpttEqualsLstmBidirectional) {
  const bool variable = GetParam();
  torch::manual_seed(5);
  auto model = make_model({"bilstm", F, H, L});
  model->to(torch::kFloat64);
  auto head = make_head("mse", 2 * H, 2);
  head->to(torch::kFloat64);
  torch::nn::LSTM reference(torch::nn::LSTMOptions(F, H).num_layers(L).bidirectional(true));
  reference->to(torch::kFloat64);
  const auto ours = model->named_parameters();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : reference->named_parameters()) p.value().copy_(ours[our_name(p.key())]);
  }
  auto lengths = variable ? torch::tensor({7, 11, 1, 4}, torch::kLong) : torch::Tensor();
  auto x = torch::randn({T, B, F}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
  auto y = torch::randn({T, B, 2}, torch::kFloat64);                        // [T, B, 2]
  auto h0 = torch::randn({2 * L, B, H}, torch::kFloat64);                   // [2L, B, H]
  auto c0 = torch::randn({2 * L, B, H}, torch::kFloat64);
  // Our state: (h_fwd, c_fwd, h_bwd, c_bwd) per layer, each [1, B, H]; LibTorch's row 2l + d.
  std::vector<torch::Tensor> state;
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t d = 0; d < 2; ++d) {
      state.push_back(h0.narrow(0, 2 * l + d, 1).detach().clone().requires_grad_(true));
      state.push_back(c0.narrow(0, 2 * l + d, 1).detach().clone().requires_grad_(true));
    }
  }
  SequenceBatch batch{x, y, lengths};
  const auto result = make_method("full")->compute(
      Workload{*model, *head, batch, State(state), Reduction::kSum});

  auto x_ref = x.detach().clone().requires_grad_(true);
  auto h0_ref = h0.clone().requires_grad_(true), c0_ref = c0.clone().requires_grad_(true);
  torch::Tensor z;  // [T, B, 2H]
  std::tuple<torch::Tensor, torch::Tensor> hc;
  if (variable) {
    auto packed = rnn_utils::pack_padded_sequence(x_ref, lengths, false, false);
    auto [out, state_n] = reference->forward_with_packed_input(packed, std::make_tuple(h0_ref, c0_ref));
    z = std::get<0>(rnn_utils::pad_packed_sequence(out, false, 0.0, T));
    hc = state_n;
  } else {
    std::tie(z, hc) = reference->forward(x_ref, std::make_tuple(h0_ref, c0_ref));
  }
  auto losses = head->forward(z, y);  // [T, B]
  auto valid = variable ? (torch::arange(T).unsqueeze(1) < lengths.unsqueeze(0)).to(torch::kFloat64)
                        : torch::ones({T, B}, torch::kFloat64);
  // Our head's gradient, taken before the reference's backward accumulates into the same head.
  testing::Named head_grads_ours;
  for (auto& p : head->named_parameters()) head_grads_ours[p.key()] = p.value().grad().clone();
  for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
  auto loss = (losses * valid).sum();
  loss.backward();
  EXPECT_LE(testing::rel_diff(result.loss, loss.detach()), 1e-12);

  testing::Named got, want;
  for (auto& p : reference->named_parameters()) {
    got[p.key()] = ours[our_name(p.key())].grad();
    want[p.key()] = p.value().grad();
  }
  for (auto& p : head->named_parameters()) {
    got["head." + p.key()] = head_grads_ours[p.key()];
    want["head." + p.key()] = p.value().grad();
  }
  got["x"] = x.grad();
  want["x"] = x_ref.grad();
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t d = 0; d < 2; ++d) {
      const auto k = size_t(4 * l + 2 * d);
      const std::string row = std::to_string(2 * l + d);
      got["h0[" + row + "]"] = state[k].grad();
      want["h0[" + row + "]"] = h0_ref.grad().narrow(0, 2 * l + d, 1);
      got["c0[" + row + "]"] = state[k + 1].grad();
      want["c0[" + row + "]"] = c0_ref.grad().narrow(0, 2 * l + d, 1);
      got["h_n[" + row + "]"] = result.final_state[k];
      want["h_n[" + row + "]"] = std::get<0>(hc).narrow(0, 2 * l + d, 1).detach();
      got["c_n[" + row + "]"] = result.final_state[k + 1];
      want["c_n[" + row + "]"] = std::get<1>(hc).narrow(0, 2 * l + d, 1).detach();
    }
  }
  testing::expect_close(got, want, 1e-10, variable ? "bilstm, variable lengths" : "bilstm");
}

INSTANTIATE_TEST_SUITE_P(Lengths, AgainstLibTorch, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Variable" : "Fixed"; });

// The backward direction run over [5, T) then [0, 5) equals one run over [0, T), outputs,
// exit and draws (each direction a 2-layer LSTM with dropout drawn per step), with
// lengths that end inside either range.
TEST(Bidirectional, BackwardDirectionCutAnywhere) {
  torch::manual_seed(8);
  auto model = make_model({"bi:lstm", F, H, 2, 0.4});
  model->to(torch::kFloat64);
  const auto& bi = *as_bidirectional(*model);
  auto x = torch::randn({T, B, F}, torch::kFloat64);
  auto lengths = torch::tensor({3, 11, 1, 8}, torch::kLong);
  auto [entry_f, entry_b] = bi.split_state(model->initial_state(B, torch::dtype(torch::kFloat64)), 0);
  entry_b = State{torch::randn({2, B, H}, torch::kFloat64), torch::randn({2, B, H}, torch::kFloat64)};
  torch::manual_seed(9);
  auto [z_all, exit_all] = bi.run_backward_direction(0, x, entry_b, lengths);
  const auto after_all = torch::rand({1});
  torch::manual_seed(9);
  SequenceBatch batch{x, torch::zeros({T, B}), lengths};
  auto [z_hi, mid] = bi.run_backward_direction(0, x.narrow(0, 5, T - 5), entry_b,
                                               batch.slice(5, T - 5).lengths);
  auto [z_lo, exit] = bi.run_backward_direction(0, x.narrow(0, 0, 5), mid, batch.slice(0, 5).lengths);
  EXPECT_TRUE(torch::equal(torch::rand({1}), after_all));
  EXPECT_LE(testing::rel_diff(torch::cat({z_lo, z_hi}), z_all), 1e-14);
  for (size_t i = 0; i < exit.size(); ++i) EXPECT_LE(testing::rel_diff(exit[i], exit_all[i]), 1e-14);
  // Past a sequence's end the output is zero; a sequence of length 1 ends on h0's update.
  EXPECT_EQ(z_all.narrow(0, 3, T - 3).select(1, 0).abs().max().item<double>(), 0.0);
}

TEST(Bidirectional, StateIsEachLayersForwardThenBackwardState) {
  auto model = make_model({"bilstm", F, H, 2});
  EXPECT_EQ(model->output_size(), 2 * H);
  const auto spec = model->state_spec();
  ASSERT_EQ(spec.size(), 8u);
  EXPECT_EQ(spec[0].name, "h_l0_fwd");
  EXPECT_EQ(spec[3].name, "c_l0_bwd");
  EXPECT_EQ(spec[4].name, "h_l1_fwd");
  auto [z, h] = model->forward(torch::randn({T, B, F}), model->initial_state(B, {}));
  EXPECT_EQ(z.sizes(), (std::vector<int64_t>{T, B, 2 * H}));
  model->check_state(h, B, torch::kFloat32, "h");
  const auto& bi = *as_bidirectional(*model);
  auto [f, b] = bi.split_state(h, 1);
  EXPECT_TRUE(f[0].is_same(h[4]));
  EXPECT_TRUE(b[1].is_same(h[7]));
  EXPECT_EQ(make_model({"bigru", F, H, 1})->state_spec().size(), 2u);
}

TEST(Bidirectional, WrapsAnyKind) {
  auto model = make_model({"bi:gru_v3", F, H, 2});
  const auto* bi = as_bidirectional(*model);
  ASSERT_NE(bi, nullptr);
  EXPECT_EQ(bi->num_layers(), 1);
  EXPECT_EQ(bi->forward_module(0).state_spec()[0].shape_for_batch(B), (std::vector<int64_t>{2, B, H}));
  expect_error_mentions([] { make_model({"bi:bilstm", F, H}); }, {"bi:bilstm", "left-to-right"});
  expect_error_mentions([] { make_model({"bi:nope", F, H}); }, {"nope", "known kinds"});
}

TEST(Bidirectional, BadLayersAreRejected) {
  auto lstm = [](int64_t in, int64_t hidden) {
    return std::make_shared<TorchRnn>(CellKind::kLstm, in, hidden, 1);
  };
  expect_error_mentions([] { Bidirectional({}); }, {"layers", "none"});
  expect_error_mentions([&] { Bidirectional({{lstm(3, 4), lstm(2, 4)}}); },
                        {"layers[0]", "3", "2"});
  expect_error_mentions([&] { Bidirectional({{lstm(3, 4), lstm(3, 4)}, {lstm(4, 4), lstm(4, 4)}}); },
                        {"layers[1]", "input size 8", "got 4"});
  expect_error_mentions([&] { Bidirectional({{lstm(3, 4), lstm(3, 4)}}, 1.0); }, {"dropout", "1"});
}

// Every method that cuts the sequence refuses a bidirectional model, naming the methods
// that handle it; bivlrnn refuses a left-to-right one.
TEST(Bidirectional, MethodsThatCutTheSequenceRefuseIt) {
  torch::manual_seed(2);
  auto model = make_model({"bilstm", F, H});
  auto head = make_head("ce", model->output_size(), 3);
  SequenceBatch batch{torch::randn({T, B, F}), torch::randint(0, 3, {T, B}), {}};
  for (const char* spec : {"vlrnn:block_length=4", "tbptt:k=3", "revolve:slots=2"}) {
    SCOPED_TRACE(spec);
    expect_error_mentions([&] { make_method_from_spec(spec)->compute(Workload{*model, *head, batch}); },
                          {"bidirectional", "[0, ", "full, checkpoint, bivlrnn or planner"});
  }
  auto lstm = make_model({"lstm", F, H});
  auto lstm_head = make_head("ce", H, 3);
  expect_error_mentions(
      [&] { make_method("bivlrnn")->compute(Workload{*lstm, *lstm_head, batch}); },
      {"bivlrnn", "bidirectional", "vlrnn"});
}

}  // namespace
}  // namespace vlrnn
