#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"

namespace vlrnn {
namespace {

class BuiltInModel : public ::testing::TestWithParam<std::string> {};

// Two layers (every kind takes them; gru_lstm's LSTM part always has 3).
int64_t layers_for(const std::string&) { return 2; }

TEST_P(BuiltInModel, BlockwiseForwardEqualsOneForward) {
  if (is_bidirectional_kind(GetParam())) {
    GTEST_SKIP() << "a bidirectional model runs on the whole sequence only "
                    "(tests/core/test_bidirectional.cpp cuts its directions)";
  }
  torch::manual_seed(3);
  auto model = make_model({GetParam(), 3, 4, layers_for(GetParam())});
  model->to(torch::kFloat64);
  auto x = torch::randn({9, 2, 3}, torch::kFloat64);  // [T, B, F]
  auto h0 = model->initial_state(2, torch::dtype(torch::kFloat64));
  auto [z_all, h_all] = model->forward(x, h0);
  EXPECT_EQ(z_all.sizes(), (std::vector<int64_t>{9, 2, model->output_size()}));
  // Strictly sequential: running 4 + 5 steps from the carried state gives the same result.
  auto [z1, h1] = model->forward(x.narrow(0, 0, 4), h0);
  auto [z2, h2] = model->forward(x.narrow(0, 4, 5), h1);
  EXPECT_TRUE(torch::allclose(torch::cat({z1, z2}), z_all, 1e-12, 1e-12));
  for (size_t i = 0; i < h_all.size(); ++i) EXPECT_TRUE(torch::allclose(h2[i], h_all[i], 1e-12, 1e-12));
}

TEST_P(BuiltInModel, StateSpecMatchesTheStateItReturns) {
  auto model = make_model({GetParam(), 3, 4, layers_for(GetParam())});
  auto [z, h] = model->forward(torch::randn({2, 5, 3}), model->initial_state(5, {}));
  model->check_state(h, 5, torch::kFloat32, "h");
}

INSTANTIATE_TEST_SUITE_P(Models, BuiltInModel, ::testing::ValuesIn(model_kinds()));

TEST(Models, GruLstmStateIsTheTupleOfBoth) {
  auto model = make_model({"gru_lstm", 3, 4});
  auto spec = model->state_spec();
  ASSERT_EQ(spec.size(), 3u);
  EXPECT_EQ(spec[0].shape_for_batch(2), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(spec[1].shape_for_batch(2), (std::vector<int64_t>{3, 2, 4}));
}

TEST(Models, UnknownKindListsTheKnownOnes) {
  testing::expect_error_mentions([] { make_model({"transformer", 3, 4}); },
                                 {"model", "transformer", "rnn, gru, lstm, gru_lstm"});
}

TEST(Models, BadSizesAreRejected) {
  testing::expect_error_mentions([] { make_model({"lstm", 3, 0}); }, {"hidden_size", "> 0", "0"});
  testing::expect_error_mentions([] { make_model({"gru", 3, 4, 0}); },
                                 {"num_layers", ">= 1", "0"});
}

TEST(Heads, CrossEntropyGivesOneLossPerStep) {
  auto head = make_head("ce", 4, 3);
  auto loss = head->forward(torch::randn({5, 2, 4}), torch::randint(0, 3, {5, 2}));
  EXPECT_EQ(loss.sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_TRUE((loss > 0).all().item<bool>());
}

TEST(Heads, MseIsTheMeanSquaredErrorOfEachStep) {
  auto head = std::make_shared<LinearMseHead>(4, 2);
  auto z = torch::randn({3, 2, 4});
  auto y = torch::randn({3, 2, 2});
  auto expected = (head->forward(z, y));
  auto manual = (torch::nn::functional::linear(z, head->parameters()[0], head->parameters()[1]) - y)
                    .pow(2).mean(-1);
  EXPECT_TRUE(torch::allclose(expected, manual));
}

TEST(Heads, TargetsOfTheWrongKindAreRejected) {
  auto ce = make_head("ce", 4, 3);
  testing::expect_error_mentions([&] { ce->check_targets(torch::randn({5, 2}), "y"); },
                                 {"y", "int64", "Float"});
  testing::expect_error_mentions(
      [&] { ce->check_targets(torch::full({5, 2}, 7, torch::kLong), "y"); },
      {"y", "[0, 3)", "7"});
  auto mse = make_head("mse", 4, 2);
  testing::expect_error_mentions([&] { mse->check_targets(torch::randn({5, 2, 3}), "y"); },
                                 {"y", "[T, B, 2]", "[5, 2, 3]"});
}

}  // namespace
}  // namespace vlrnn

namespace vlrnn {
namespace {

// Dropout masks are drawn one step at a time, so two blocks from the same generator state
// draw what one pass over the whole sequence draws: the basis of exactness under dropout.
TEST(ModelsWithDropout, BlocksDrawTheSameMasksAsOnePass) {
  for (const std::string kind : {"lstm", "gru", "rnn", "gru_lstm"}) {
    torch::manual_seed(5);
    auto model = make_model({kind, 3, 4, 3, /*dropout=*/0.4});
    model->to(torch::kFloat64);
    auto x = torch::randn({10, 2, 3}, torch::kFloat64);
    auto h0 = model->initial_state(2, torch::dtype(torch::kFloat64));
    torch::manual_seed(9);
    auto [z_all, h_all] = model->forward(x, h0);
    torch::manual_seed(9);
    auto [z1, h1] = model->forward(x.narrow(0, 0, 3), h0);
    auto [z2, h2] = model->forward(x.narrow(0, 3, 7), h1);
    EXPECT_TRUE(torch::allclose(torch::cat({z1, z2}), z_all, 1e-12, 1e-12)) << kind;
  }
}

TEST(ModelsWithDropout, MasksAreActiveInTrainingOnly) {
  torch::manual_seed(5);
  auto model = make_model({"lstm", 3, 4, 2, /*dropout=*/0.5});
  auto x = torch::randn({6, 2, 3});
  auto h0 = model->initial_state(2, {});
  auto z_a = model->forward(x, h0).first;
  auto z_b = model->forward(x, h0).first;
  EXPECT_FALSE(torch::allclose(z_a, z_b));  // fresh masks each pass
  model->eval();
  EXPECT_TRUE(torch::equal(model->forward(x, h0).first, model->forward(x, h0).first));
}

TEST(ModelsWithDropout, DropoutOutOfRangeIsRejected) {
  testing::expect_error_mentions([] { make_model({"lstm", 3, 4, 2, 1.5}); },
                                 {"dropout", "[0, 1)", "1.5"});
}

}  // namespace
}  // namespace vlrnn

namespace vlrnn {
namespace {

// A long variable-length block is run in runs between ends (NOTE [ Runs between ends ]), one
// call each, and must still equal every sequence run alone over its own length.
TEST(ModelsWithLengths, LongBlocksEqualEverySequenceAlone) {
  for (const std::string kind : {"lstm", "gru_lstm"}) {
    torch::manual_seed(8);
    auto model = make_model({kind, 3, 4, 2});
    model->to(torch::kFloat64);
    auto x = torch::randn({150, 3, 3}, torch::kFloat64);  // [T, B, F]
    auto lengths = torch::tensor({70, 150, 9}, torch::kLong);
    auto h0 = model->initial_state(3, torch::dtype(torch::kFloat64));
    auto [z, h] = model->forward(x, h0, lengths);
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t len = lengths[b].item<int64_t>();
      auto [z_b, h_b] = model->forward(x.narrow(0, 0, len).narrow(1, b, 1),
                                       model->initial_state(1, torch::dtype(torch::kFloat64)));
      EXPECT_TRUE(torch::allclose(z.narrow(0, 0, len).narrow(1, b, 1), z_b, 1e-12, 1e-12)) << kind;
      EXPECT_EQ(z.narrow(0, len, 150 - len).narrow(1, b, 1).abs().sum().item<double>(), 0.0);
      for (size_t i = 0; i < h.size(); ++i) {
        EXPECT_TRUE(torch::allclose(h[i].narrow(1, b, 1), h_b[i], 1e-12, 1e-12)) << kind << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace vlrnn
