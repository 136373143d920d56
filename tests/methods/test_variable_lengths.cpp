// Variable-length batches in every method, against an independent reference: each sequence
// run alone (a batch of one, its own length) through full BPTT.
#include "test_util.h"

namespace vlrnn {
namespace {

namespace rnn_utils = torch::nn::utils::rnn;
using testing::expect_error_mentions;

struct Grads {
  std::vector<torch::Tensor> params;
  torch::Tensor h0;
  torch::Tensor inputs;
};

struct VariableProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  torch::Tensor x, y, lengths, h0;  // x [T, B, F], y [T, B], lengths [B], h0 = state[0]

  explicit VariableProblem(const std::string& kind, int64_t layers = 1) {
    torch::manual_seed(31);
    model = make_model({kind, 3, 4, layers});
    model->to(torch::kFloat64);
    head = make_head("ce", model->output_size(), 3);
    head->to(torch::kFloat64);
    lengths = torch::tensor({7, 13, 1, 3, 9}, torch::kLong);  // unsorted; 1; < K; = T
    x = torch::randn({13, 5, 3}, torch::kFloat64);
    y = torch::randint(0, 3, {13, 5}, torch::kLong);
    h0 = torch::randn(model->state_spec()[0].shape_for_batch(5), torch::kFloat64);
  }

  State initial(const torch::Tensor& h_first, int64_t batch) const {
    auto state = model->initial_state(batch, torch::dtype(torch::kFloat64));
    return State([&] {
      auto tensors = state.tensors();
      tensors[0] = h_first;
      return tensors;
    }());
  }

  void zero_grads() const {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
  }

  Grads collect(const torch::Tensor& h0_leaf, const torch::Tensor& x_leaf) const {
    Grads g;
    for (auto& p : model->parameters()) g.params.push_back(p.grad().clone());
    for (auto& p : head->parameters()) g.params.push_back(p.grad().clone());
    g.h0 = h0_leaf.grad().clone();
    g.inputs = x_leaf.grad().clone();
    return g;
  }

  // The batched run with `method`.
  std::pair<Grads, GradientResult> batched(const std::string& method, Reduction reduction) const {
    zero_grads();
    auto h0_leaf = h0.clone().requires_grad_(true);
    auto x_leaf = x.clone().requires_grad_(true);
    SequenceBatch batch{x_leaf, y, lengths};
    auto result = make_method_from_spec(method)->compute(
        {*model, *head, batch, initial(h0_leaf, 5), reduction});
    return {collect(h0_leaf, x_leaf), result};
  }

  // The reference for SUM: every sequence alone, its own length, through full BPTT; the
  // gradients accumulate across the runs. Also returns each sequence's final state.
  std::pair<Grads, std::vector<State>> one_by_one_sum() const {
    zero_grads();
    auto h0_leaf = h0.clone().requires_grad_(true);
    auto x_leaf = x.clone().requires_grad_(true);
    std::vector<State> finals;
    for (int64_t b = 0; b < 5; ++b) {
      const int64_t len = lengths[b].item<int64_t>();
      SequenceBatch alone{x_leaf.narrow(0, 0, len).narrow(1, b, 1),
                          y.narrow(0, 0, len).narrow(1, b, 1)};
      auto result = make_method("full")->compute(
          {*model, *head, alone, initial(h0_leaf.narrow(1, b, 1), 1), Reduction::kSum});
      finals.push_back(result.final_state);
    }
    return {collect(h0_leaf, x_leaf), finals};
  }
};

double worst(const Grads& a, const Grads& b) {
  double w = 0;
  auto rel = [](const torch::Tensor& p, const torch::Tensor& q) {
    return ((p - q).abs().max() / q.abs().max().clamp_min(1e-300)).item<double>();
  };
  for (size_t i = 0; i < a.params.size(); ++i) w = std::max(w, rel(a.params[i], b.params[i]));
  w = std::max(w, rel(a.h0, b.h0));
  w = std::max(w, rel(a.inputs, b.inputs));
  return w;
}

class VariableLengths : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(VariableLengths, SumEqualsEverySequenceAlone) {
  const auto& [kind, method] = GetParam();
  VariableProblem p(kind, kind == "lstm" ? 3 : 1);
  auto [reference, finals] = p.one_by_one_sum();
  auto [got, result] = p.batched(method, Reduction::kSum);
  EXPECT_LE(worst(got, reference), 1e-10);
  // The final state of each sequence is its state after its own last step.
  for (int64_t b = 0; b < 5; ++b) {
    for (size_t i = 0; i < finals[b].size(); ++i) {
      EXPECT_TRUE(torch::allclose(result.final_state[i].narrow(1, b, 1), finals[b][i], 1e-12, 1e-12))
          << "sequence " << b << " state " << i;
    }
  }
  // Steps past a sequence's end carry no loss.
  EXPECT_EQ(result.step_losses[5][2].item<double>(), 0.0);
}

// MEAN: each sequence averaged over its own length, then over the batch.
TEST_P(VariableLengths, MeanIsTheMeanOfEachSequencesOwnMean) {
  const auto& [kind, method] = GetParam();
  VariableProblem p(kind, kind == "lstm" ? 3 : 1);
  auto [got, result] = p.batched(method, Reduction::kMean);
  // Loss check from per-step losses: mean over b of (sum_t l[t, b] / len_b).
  auto per_sequence = result.step_losses.sum(0) / p.lengths.to(torch::kFloat64);
  EXPECT_NEAR(result.loss.item<double>(), per_sequence.mean().item<double>(), 1e-12);
  // Gradient check: the batched MEAN equals the sum over sequences of (1 / (B len_b)) times
  // each sequence's SUM gradient, run alone.
  p.zero_grads();
  auto h0_leaf = p.h0.clone().requires_grad_(true);
  auto x_leaf = p.x.clone().requires_grad_(true);
  for (int64_t b = 0; b < 5; ++b) {
    const int64_t len = p.lengths[b].item<int64_t>();
    SequenceBatch alone{x_leaf.narrow(0, 0, len).narrow(1, b, 1), p.y.narrow(0, 0, len).narrow(1, b, 1)};
    auto [z, h] = p.model->forward(alone.inputs, p.initial(h0_leaf.narrow(1, b, 1), 1));
    auto l = p.head->forward(z, alone.targets);
    (l.sum() / double(5 * len)).backward();
  }
  EXPECT_LE(worst(got, p.collect(h0_leaf, x_leaf)), 1e-10);
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndMethods, VariableLengths,
    ::testing::Combine(::testing::Values("rnn", "gru", "lstm", "gru_lstm"),
                       ::testing::Values("full", "vlrnn:block_length=4", "vlrnn:block_length=1",
                                         "checkpoint:segments=3",
                                         "checkpoint:segments=4,head_inside=0", "tbptt:k=13")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      for (auto& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(VariableLengths, PackedSequenceInPackedLossesOut) {
  VariableProblem p("gru");
  auto [padded_grads, padded] = p.batched("vlrnn:block_length=4", Reduction::kMean);
  p.zero_grads();
  auto x_leaf = p.x.clone().requires_grad_(true);
  auto batch = SequenceBatch::from_packed_sequences(
      rnn_utils::pack_padded_sequence(x_leaf, p.lengths, false, false),
      rnn_utils::pack_padded_sequence(p.y, p.lengths, false, false));
  auto h0_leaf = p.h0.clone().requires_grad_(true);
  auto packed = make_method("vlrnn", {{"block_length", 4}})->compute(
      {*p.model, *p.head, batch, p.initial(h0_leaf, 5), Reduction::kMean});
  ASSERT_TRUE(packed.packed_step_losses.has_value());
  EXPECT_EQ(packed.packed_step_losses->data().size(0), p.lengths.sum().item<int64_t>());
  auto unpacked = std::get<0>(rnn_utils::pad_packed_sequence(*packed.packed_step_losses));
  EXPECT_TRUE(torch::allclose(unpacked, padded.step_losses.narrow(0, 0, unpacked.size(0)), 1e-12, 1e-12));
  EXPECT_FALSE(padded.packed_step_losses.has_value());
  // The gradient reaches the packed data through the padding.
  EXPECT_LE(worst(p.collect(h0_leaf, x_leaf), padded_grads), 1e-10);
}

TEST(VariableLengths, BadLengthsAreRejected) {
  testing::SmallProblem p("gru", 6, 3);
  auto method = make_method("vlrnn", {{"block_length", 2}});
  p.batch.lengths = torch::tensor({6, 0, 2});
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.lengths", "[1, T = 6]", "[0, 6]"});
  p.batch.lengths = torch::tensor({6, 7, 2});
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.lengths", "[1, T = 6]", "[2, 7]"});
  p.batch.lengths = torch::tensor({6, 2});
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.lengths", "shape [3]", "[2]"});
  p.batch.lengths = torch::tensor({6.0, 2.0, 1.0});
  expect_error_mentions([&] { method->compute(p.workload()); },
                        {"batch.lengths", "integer", "Float"});
}

}  // namespace
}  // namespace vlrnn
