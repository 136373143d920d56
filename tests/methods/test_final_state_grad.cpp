// A caller's dL/d(final state) (Workload::final_state_grad, NOTE [ Gradients across calls ]
// in vlrnn/methods/gradient_method.h) in every method: against autograd of the loss plus
// <seed, final state> on the whole sequence, and a stream cut into calls of 1, 2 and 3 steps
// (the state handed forward, dL/dh0 handed back as the previous call's seed) against one
// call on the whole stream; a loss scale (NOTE [ Loss scale ]). Float64, SUM, 1e-10
// relative.
// Shapes: T = 7 steps, B = 4 sequences, F = 3 features, H = 4 hidden.
#include "test_util.h"

#include "vlrnn/core/bidirectional.h"

#include <cmath>

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;

constexpr int64_t kSteps = 7, kBatch = 4;

struct Stream {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  torch::Tensor x, y, lengths;  // [T, B, F], [T, B], [B] (undefined: all T)
  State h0, seed;               // the state entering step 0; dL/d(final state) after T

  // `lengths`: empty for all T; else one per sequence.
  Stream(const std::string& kind, int64_t layers, std::vector<int64_t> lengths_given) {
    torch::manual_seed(11);
    model = make_model({kind, 3, 4, layers});
    model->to(torch::kFloat64);
    head = make_head("ce", model->output_size(), 3);
    head->to(torch::kFloat64);
    x = torch::randn({kSteps, kBatch, 3}, torch::kFloat64);
    y = torch::randint(0, 3, {kSteps, kBatch}, torch::kLong);
    if (!lengths_given.empty()) lengths = torch::tensor(lengths_given, torch::kLong);
    h0 = testing::random_state(*model, kBatch);
    seed = testing::random_state(*model, kBatch);
  }

  void zero_grads() const { testing::clear_grads(*model, *head); }
  // The parameters' gradients and dL/dh0 (`h0_grad`), by name.
  Named gradients(const State& h0_grad) const {
    Named out;
    for (const auto& p : model->named_parameters()) out["model." + p.key()] = p.value().grad().clone();
    for (const auto& p : head->named_parameters()) out["head." + p.key()] = p.value().grad().clone();
    for (size_t i = 0; i < h0_grad.size(); ++i) out["h0 " + std::to_string(i)] = h0_grad[i];
    return out;
  }
  static State grads_of(const State& leaves) {
    std::vector<torch::Tensor> out;
    for (const auto& h : leaves) out.push_back(h.grad().defined() ? h.grad() : torch::zeros_like(h));
    return State(std::move(out));
  }

  // The state's tensors of sequences `index` ([b] int64), and `part` written back there.
  State select(const State& state, const torch::Tensor& index) const {
    std::vector<torch::Tensor> out;
    for (size_t i = 0; i < state.size(); ++i) {
      out.push_back(state[i].index_select(model->state_spec()[i].batch_dim, index));
    }
    return State(std::move(out));
  }
  State scatter(const State& state, const torch::Tensor& index, const State& part) const {
    std::vector<torch::Tensor> out;
    for (size_t i = 0; i < state.size(); ++i) {
      out.push_back(state[i].index_copy(model->state_spec()[i].batch_dim, index, part[i]));
    }
    return State(std::move(out));
  }

  // Reference: autograd of scale · Σ valid step losses + Σ_i <seed_i, final state_i>, the
  // model run once on the whole sequence.
  Named reference(double scale = 1.0) const {
    zero_grads();
    const State leaves = h0.detached_leaves();
    auto [z, final_state] = model->forward(x, leaves, lengths);  // z [T, B, Z]
    auto losses = head->forward(z, y);                           // [T, B]
    if (lengths.defined()) {
      losses = torch::where(torch::arange(kSteps).unsqueeze(1) < lengths.unsqueeze(0), losses,
                            torch::zeros_like(losses));
    }
    auto loss = scale * losses.sum();
    for (size_t i = 0; i < seed.size(); ++i) loss = loss + (final_state[i] * seed[i]).sum();
    loss.backward();
    return gradients(grads_of(leaves));
  }

  // `method` on the whole stream, seeded with `seed`, the loss scaled by `scale`; `result`
  // (when given) gets what the method returned.
  Named whole(GradientMethod& method, double scale = 1.0,
              GradientResult* result = nullptr) const {
    zero_grads();
    const State leaves = h0.detached_leaves();
    Workload w{*model, *head, SequenceBatch{x, y, lengths}, leaves, Reduction::kSum};
    w.final_state_grad = seed;
    w.loss_scale = scale;
    auto returned = method.compute(w);
    if (result != nullptr) *result = std::move(returned);
    return gradients(grads_of(leaves));
  }

  // The stream cut into calls of `call` steps. A sequence that ended takes no part in later
  // calls (its state and its gradient pass them unchanged). Forward: each call's entry is the
  // previous call's final state. Backward, last call to first: each call is seeded with
  // the gradient at its end (the next call's dL/dh0, or `seed` after T) and yields dL/dh0.
  Named chunked(GradientMethod& method, int64_t call) const {
    zero_grads();
    const auto all = lengths.defined() ? lengths : torch::full({kBatch}, kSteps, torch::kLong);
    struct Call {
      int64_t t0, n;
      torch::Tensor alive, lengths;  // sequences still running [b], their steps in the call [b]
      State entry;                   // the state of `alive` entering the call
    };
    std::vector<Call> calls;
    State h = h0;
    for (int64_t t0 = 0; t0 < kSteps; t0 += call) {
      Call c;
      c.t0 = t0;
      c.n = std::min(call, kSteps - t0);
      c.alive = (all > t0).nonzero().squeeze(1);
      if (c.alive.numel() == 0) break;  // no sequence reaches t0 (a padded tail): no call
      c.lengths = (all.index_select(0, c.alive) - t0).clamp_max(c.n);
      c.entry = select(h, c.alive);
      torch::NoGradGuard no_grad;
      const auto xs = x.narrow(0, t0, c.n).index_select(1, c.alive);
      h = scatter(h, c.alive, model->forward(xs, c.entry, c.lengths).second);
      calls.push_back(c);
    }
    State delta = seed;  // dL/d(state after the calls run so far, backward)
    for (auto c = calls.rbegin(); c != calls.rend(); ++c) {
      const State leaves = c->entry.detached_leaves();
      SequenceBatch batch{x.narrow(0, c->t0, c->n).index_select(1, c->alive),
                          y.narrow(0, c->t0, c->n).index_select(1, c->alive),
                          lengths.defined() ? c->lengths : torch::Tensor()};
      Workload w{*model, *head, batch, leaves, Reduction::kSum};
      w.final_state_grad = select(delta, c->alive);
      method.compute(w);
      delta = scatter(delta, c->alive, grads_of(leaves));
    }
    return gradients(delta);
  }
};

std::string test_name(std::string name) {
  for (auto& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

// Lengths: every sequence T long; mixed, one of 1, one ending inside a call; all ending
// before T (the state carried through a padded tail to T).
const std::vector<std::vector<int64_t>> kLengthSets = {{}, {7, 2, 5, 1}, {6, 2, 5, 3}};

class FinalStateGrad
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// The seed reaches each sequence's final state, after its own last step.
TEST_P(FinalStateGrad, EqualsAutogradOfLossPlusSeededFinalState) {
  const auto& [kind, spec] = GetParam();
  for (const auto& lengths : kLengthSets) {
    SCOPED_TRACE(::testing::Message() << "lengths " << lengths.size());
    Stream s(kind, kind == "lstm" ? 2 : 1, lengths);
    auto method = make_method_from_spec(spec);
    expect_close(s.whole(*method), s.reference(), 1e-10, kind + " " + spec + " vs autograd");
  }
}

// NOTE [ Loss scale ]: the loss's seeds are scaled, the caller's final_state_grad taken as
// given, and the loss and per-step losses returned are those of scale 1. A scale that is not
// a power of two, so that a missed or doubled factor cannot cancel.
TEST_P(FinalStateGrad, LossScaleMultipliesTheLossNotTheSeed) {
  const auto& [kind, spec] = GetParam();
  constexpr double kScale = 384.0;
  for (const auto& lengths : kLengthSets) {
    SCOPED_TRACE(::testing::Message() << "lengths " << lengths.size());
    Stream s(kind, kind == "lstm" ? 2 : 1, lengths);
    auto method = make_method_from_spec(spec);
    GradientResult unscaled, scaled;
    s.whole(*method, 1.0, &unscaled);
    expect_close(s.whole(*method, kScale, &scaled), s.reference(kScale), 1e-10,
                 kind + " " + spec + " scaled vs autograd");
    EXPECT_LE(testing::rel_diff(scaled.loss, unscaled.loss), 1e-12) << "the loss returned";
    EXPECT_LE(testing::rel_diff(scaled.step_losses, unscaled.step_losses), 1e-12)
        << "the per-step losses";
  }
}

// NOTE [ Gradients across calls ]: calls of 1, 2 and 3 steps (K = 5: a block longer than
// the call) equal one call on the whole stream, dL/dh0 included.
TEST_P(FinalStateGrad, StreamCutIntoCallsEqualsOneCall) {
  const auto& [kind, spec] = GetParam();
  if (is_bidirectional_kind(kind)) GTEST_SKIP() << "a bidirectional model's outputs need the whole stream";
  for (const auto& lengths : kLengthSets) {
    Stream s(kind, kind == "lstm" ? 2 : 1, lengths);
    auto method = make_method_from_spec(spec);  // one object: the planner plans once per T
    const Named whole = s.whole(*method);
    for (const int64_t call : {1, 2, 3}) {
      expect_close(s.chunked(*method, call), whole, 1e-10,
                   kind + " " + spec + " calls of " + std::to_string(call) + ", lengths " +
                       std::to_string(lengths.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    LeftToRight, FinalStateGrad,
    ::testing::Combine(::testing::Values("gru", "lstm", "gru_v3"),
                       ::testing::Values("full", "vlrnn", "vlrnn:block_length=1", "vlrnn:block_length=5",
                                         "checkpoint:segments=2",
                                         "checkpoint:segments=3,head_inside=0",
                                         "revolve:slots=2", "planner:percent=30", "tbptt:k=7")),
    [](const auto& info) {
      return test_name(std::get<0>(info.param) + "_" + std::get<1>(info.param));
    });

// Bidirectional: the final state is each layer's forward direction after its last step and
// backward direction after step 0; both parts are seeded.
INSTANTIATE_TEST_SUITE_P(
    Bidirectional, FinalStateGrad,
    ::testing::Combine(::testing::Values("bilstm", "bigru"),
                       ::testing::Values("full", "bivlrnn:block_length=1", "bivlrnn:block_length=3",
                                         "bivlrnn:block_length=9", "checkpoint:segments=3",
                                         "planner:percent=30")),
    [](const auto& info) {
      return test_name(std::get<0>(info.param) + "_" + std::get<1>(info.param));
    });

// Truncated BPTT adds the seed to its last window only: with the seed minus without it is
// the gradient of <seed, h_T> through the last window's steps, the state before it constant.
TEST(FinalStateGrad, TbpttSeedsItsLastWindowOnly) {
  Stream s("gru", 1, {});
  auto method = make_method_from_spec("tbptt:k=3");  // windows [0, 3), [3, 6), [6, 7)
  s.zero_grads();
  method->compute({*s.model, *s.head, SequenceBatch{s.x, s.y}, s.h0, Reduction::kSum});
  const Named without = s.gradients({});
  s.zero_grads();
  Workload seeded{*s.model, *s.head, SequenceBatch{s.x, s.y}, s.h0, Reduction::kSum};
  seeded.final_state_grad = s.seed;
  method->compute(seeded);
  Named difference = s.gradients({});
  for (auto& [name, g] : difference) g = g - without.at(name);

  s.zero_grads();
  State h6;
  {
    torch::NoGradGuard no_grad;
    h6 = s.model->forward(s.x.narrow(0, 0, 6), s.h0).second;
  }
  auto h7 = s.model->forward(s.x.narrow(0, 6, 1), h6).second;
  (h7[0] * s.seed[0]).sum().backward();
  Named expected;
  for (const auto& p : s.model->named_parameters()) expected["model." + p.key()] = p.value().grad().clone();
  for (const auto& p : s.head->named_parameters()) expected["head." + p.key()] = torch::zeros_like(p.value());
  expect_close(difference, expected, 1e-10, "tbptt:k=3 seed");
  EXPECT_GT(difference.at("model.gru.weight_hh_l0").abs().max().item<double>(), 0.0);
}

TEST(FinalStateGrad, BadSeedsAreRejected) {
  Stream s("lstm", 2, {});
  auto method = make_method_from_spec("vlrnn");
  Workload w{*s.model, *s.head, SequenceBatch{s.x, s.y}, s.h0, Reduction::kSum};
  w.final_state_grad = State({s.seed[0]});
  expect_error_mentions([&] { method->compute(w); },
                        {"final_state_grad", "expected a state of 2 tensors", "got 1"});
  w.final_state_grad = State({s.seed[0], s.seed[1].narrow(1, 0, 3)});
  expect_error_mentions([&] { method->compute(w); },
                        {"final_state_grad[1]", "expected shape [2, 4, 4]", "[2, 3, 4]"});
  w.final_state_grad = State({s.seed[0], s.seed[1].to(torch::kFloat32)});
  expect_error_mentions([&] { method->compute(w); },
                        {"final_state_grad[1]", "dtype", "Double", "Float"});
  w.final_state_grad = State({s.seed[0], torch::Tensor()});
  expect_error_mentions([&] { method->compute(w); }, {"final_state_grad[1]", "undefined"});
}

TEST(FinalStateGrad, BadLossScalesAreRejected) {
  Stream s("gru", 1, {});
  auto method = make_method_from_spec("vlrnn");
  Workload w{*s.model, *s.head, SequenceBatch{s.x, s.y}, s.h0, Reduction::kSum};
  for (const double scale : {0.0, -2.0, std::nan(""), double(INFINITY)}) {
    w.loss_scale = scale;
    expect_error_mentions([&] { method->compute(w); },
                          {"loss_scale", "expected a finite number > 0"});
  }
}

}  // namespace
}  // namespace vlrnn
