// OnlineStream (vlrnn/schedule/online_stream.h): a stream pushed in chunks equals full BPTT
// on the whole stream (float64, 1e-10: parameters, h0, x, loss, per-step losses, final
// state), dropout included; it runs online_schedule's steps; the states it holds stay within
// the slots whatever its length; streams of 1 step and streams that end at a slot boundary;
// and the errors a caller can meet.
// Shapes: T steps, B = 3 sequences, F = 3 features, H = 4 hidden, 3 classes.
#include "test_util.h"

#include "vlrnn/schedule/online.h"
#include "vlrnn/schedule/online_stream.h"
#include "vlrnn/schedule/schedulers.h"

#include <numeric>

namespace vlrnn {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;

constexpr int64_t kBatch = 3;

struct StreamProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  torch::Tensor x, y;  // [T, B, F] (requires grad), [T, B]
  State h0, seed;      // h0 (requires grad); a dL/d(final state)

  StreamProblem(int64_t steps, double dropout, const std::string& kind = "lstm") {
    torch::manual_seed(5);
    model = make_model({kind, 3, 4, 2, dropout});
    model->to(torch::kFloat64);
    head = make_head("ce", model->output_size(), 3);
    head->to(torch::kFloat64);
    x = torch::randn({steps, kBatch, 3}, torch::kFloat64).requires_grad_(true);
    y = torch::randint(0, 3, {steps, kBatch}, torch::kLong);
    h0 = testing::random_state(*model, kBatch, torch::kFloat64, /*requires_grad=*/true);
    seed = testing::random_state(*model, kBatch, torch::kFloat64);
  }

  void zero_grads() const {
    std::vector<torch::Tensor> leaves(h0.begin(), h0.end());
    leaves.push_back(x);
    testing::clear_grads(*model, *head, leaves);
  }

  Named outputs(const GradientResult& result) const {
    Named out;
    for (const auto& p : model->named_parameters()) out["model." + p.key()] = p.value().grad().clone();
    for (const auto& p : head->named_parameters()) out["head." + p.key()] = p.value().grad().clone();
    for (size_t i = 0; i < h0.size(); ++i) out["grad h0 " + std::to_string(i)] = h0[i].grad().clone();
    for (size_t i = 0; i < result.final_state.size(); ++i) {
      out["final state " + std::to_string(i)] = result.final_state[i];
    }
    out["grad x"] = x.grad().clone();
    out["loss"] = result.loss;
    out["step losses"] = result.step_losses;
    return out;
  }

  // Full BPTT on the whole stream, the generators seeded with `rng_seed` first.
  Named reference(Reduction reduction, bool with_seed, uint64_t rng_seed = 9,
                  double loss_scale = 1.0) const {
    zero_grads();
    torch::manual_seed(rng_seed);
    SequenceBatch batch;
    batch.inputs = x;
    batch.targets = y;
    Workload w{*model, *head, batch, h0, reduction};
    if (with_seed) w.final_state_grad = seed;
    w.loss_scale = loss_scale;
    return outputs(make_method("full")->compute(w));
  }

  // The stream pushed in chunks of `sizes` steps (summing to T).
  std::pair<Named, OnlineStream> streamed(const std::vector<int64_t>& sizes, int64_t slots,
                                          Reduction reduction, bool with_seed,
                                          uint64_t rng_seed = 9, double loss_scale = 1.0) const {
    zero_grads();
    torch::manual_seed(rng_seed);
    OnlineStream stream(*model, *head, OnlineOptions{}.with_slots(slots), reduction, h0);
    int64_t at = 0;
    for (int64_t n : sizes) {
      stream.push(x.narrow(0, at, n), y.narrow(0, at, n));
      at += n;
    }
    const auto result = stream.finish(with_seed ? seed : State{}, loss_scale);
    return {outputs(result), std::move(stream)};
  }
};

std::vector<int64_t> chunks_of(int64_t steps, int64_t size) {
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < steps; at += size) sizes.push_back(std::min(size, steps - at));
  return sizes;
}

// Chunks of 1, 2, 3 and mixed sizes; SUM and MEAN; a caller's dL/d(final state) or none;
// dropout between the LSTM's layers. T = 29 with s = 3 passes β(3, 2) = 10 twice over.
TEST(OnlineStream, EqualsFullBpttOnTheWholeStream) {
  constexpr int64_t kSteps = 29;
  const StreamProblem p(kSteps, 0.25);
  for (const auto& reduction : {Reduction::kSum, Reduction::kMean}) {
    for (bool with_seed : {false, true}) {
      const auto reference = p.reference(reduction, with_seed);
      for (const auto& sizes : {chunks_of(kSteps, 1), chunks_of(kSteps, 2), chunks_of(kSteps, 3),
                                std::vector<int64_t>{5, 1, 13, 2, 8}, std::vector<int64_t>{kSteps}}) {
        for (int64_t slots : {1, 3, 5}) {
          const std::string what = "chunks of " + std::to_string(sizes.front()) + ".., s=" +
                                   std::to_string(slots) + ", " + to_string(reduction) +
                                   (with_seed ? ", final_state_grad" : "");
          expect_close(p.streamed(sizes, slots, reduction, with_seed).first, reference, 1e-10, what);
        }
      }
    }
  }
}

// NOTE [ Loss scale ]: finish() scales the loss's gradient, not the caller's seed, as
// compute() does (full BPTT, checked against autograd in test_final_state_grad.cpp).
TEST(OnlineStream, ALossScaleScalesTheLossNotTheSeed) {
  const StreamProblem p(11, 0.25);
  for (const auto& reduction : {Reduction::kSum, Reduction::kMean}) {
    expect_close(p.streamed({4, 4, 3}, 2, reduction, true, 9, 384.0).first,
                 p.reference(reduction, true, 9, 384.0), 1e-10,
                 "loss scale 384, " + to_string(reduction));
  }
  const auto unscaled = p.streamed({4, 4, 3}, 2, Reduction::kSum, false).first;
  const auto scaled = p.streamed({4, 4, 3}, 2, Reduction::kSum, false, 9, 384.0).first;
  for (const auto& [name, value] : unscaled) {  // the loss and final state as they were
    const bool gradient = name.rfind("model.", 0) == 0 || name.rfind("head.", 0) == 0 ||
                          name.rfind("grad ", 0) == 0;
    EXPECT_LE(testing::rel_diff(scaled.at(name), gradient ? 384.0 * value : value), 1e-10)
        << name;
  }
}

// A stream that ends after 1 step, and streams that end exactly where the slots fill
// (T − 1 = s: h0, s − 1 kept states and the working state), one step later (the first state
// the rule drops) and at β(s, 2).
TEST(OnlineStream, EndsAfterOneStepOrAtASlotBoundary) {
  constexpr int64_t kSlots = 4;
  for (int64_t steps : {int64_t(1), kSlots + 1, kSlots + 2, schedule::binomial_beta(kSlots, 2)}) {
    const StreamProblem p(steps, 0.25);
    const auto reference = p.reference(Reduction::kMean, true);
    for (const auto& sizes : {chunks_of(steps, 1), chunks_of(steps, kSlots), std::vector<int64_t>{steps}}) {
      auto [got, stream] = p.streamed(sizes, kSlots, Reduction::kMean, true);
      expect_close(got, reference, 1e-10, "T=" + std::to_string(steps));
      EXPECT_EQ(stream.steps(), steps);
      EXPECT_LE(stream.peak_held_states(), kSlots);
    }
  }
}

// The stream runs online_schedule(T, s)'s steps: its counters are the schedule's.
TEST(OnlineStream, RunsTheOnlineSchedule) {
  for (int64_t steps : {1, 2, 7, 30}) {
    const StreamProblem p(steps, 0.0, "gru");
    for (int64_t slots : {1, 2, 4}) {
      OnlineStream stream(*p.model, *p.head, OnlineOptions{}.with_slots(slots));
      for (int64_t at = 0; at < steps; at += 4) {
        const int64_t n = std::min<int64_t>(4, steps - at);
        stream.push(p.x.narrow(0, at, n).detach(), p.y.narrow(0, at, n));
      }
      EXPECT_EQ(stream.counters().forward_no_grad, steps - 1);  // NOTE [ A stream runs one step behind ]
      const auto result = stream.finish();
      const auto counts = schedule::online_schedule(steps, slots).validate();
      EXPECT_EQ(result.counters.forward_no_grad, counts.forward_no_grad_steps) << steps << " " << slots;
      EXPECT_EQ(result.counters.forward_with_grad, steps);
      EXPECT_EQ(result.counters.backward, steps);
    }
  }
}

// Memory set up front: however long the stream, it holds at most s states besides h0.
TEST(OnlineStream, HoldsAtMostItsSlotsWhateverTheLength) {
  const StreamProblem p(600, 0.0, "gru");
  for (int64_t slots : {1, 3, 6}) {
    OnlineStream stream(*p.model, *p.head, OnlineOptions{}.with_slots(slots));
    for (int64_t at = 0; at < 600; at += 7) {
      const int64_t n = std::min<int64_t>(7, 600 - at);
      stream.push(p.x.narrow(0, at, n).detach(), p.y.narrow(0, at, n));
      EXPECT_LE(stream.held_states(), slots);
    }
    EXPECT_EQ(stream.peak_held_states(), slots);
    stream.finish();
  }
}

// bytes: as many slots as states of the model's size fit; too few bytes are refused.
TEST(OnlineStream, ABytesBudgetSetsTheSlots) {
  const StreamProblem p(12, 0.0, "gru");
  const int64_t state_bytes = 2 * kBatch * 4 * 8;  // [layers = 2, B, H = 4] float64
  OnlineStream stream(*p.model, *p.head, OnlineOptions{}.with_budget_bytes(5 * state_bytes + 7));
  EXPECT_EQ(stream.slots(), 0);  // not known before the first chunk
  stream.push(p.x.detach(), p.y);
  EXPECT_EQ(stream.slots(), 5);
  OnlineStream tight(*p.model, *p.head, OnlineOptions{}.with_budget_bytes(state_bytes - 1));
  expect_error_mentions([&] { tight.push(p.x.detach(), p.y); },
                        {"budget_bytes", std::to_string(state_bytes) + " bytes",
                         "got " + std::to_string(state_bytes - 1)});
}

TEST(OnlineStream, BadCallsAreNamed) {
  const StreamProblem p(6, 0.0, "gru");
  const auto x = p.x.detach();
  {
    OnlineStream stream(*p.model, *p.head);
    expect_error_mentions([&] { stream.finish(); }, {"finish", "no step was pushed"});
    expect_error_mentions([&] { stream.push(x[0], p.y[0]); }, {"push inputs", "[n, B, F]", "[3, 3]"});
    expect_error_mentions([&] { stream.push(x.narrow(0, 0, 0), p.y.narrow(0, 0, 0)); },
                          {"push inputs", "at least one step"});
    stream.push(x.narrow(0, 0, 2), p.y.narrow(0, 0, 2));
    expect_error_mentions([&] { stream.push(x.narrow(1, 0, 2), p.y.narrow(1, 0, 2)); },
                          {"push inputs", "B = 3", "[6, 2, 3]"});
    expect_error_mentions([&] { stream.push(x.narrow(0, 2, 2), p.y.narrow(0, 2, 3)); },
                          {"push targets", "[2, 3]", "[3, 3]"});
    expect_error_mentions([&] { stream.push(x.narrow(0, 2, 2).to(torch::kFloat32), p.y.narrow(0, 2, 2)); },
                          {"push inputs", "Double", "Float"});
    stream.finish();
    expect_error_mentions([&] { stream.push(x, p.y); }, {"push", "finished already"});
    expect_error_mentions([&] { stream.finish(); }, {"finish", "finished already"});
  }
  expect_error_mentions([&] { OnlineStream(*p.model, *p.head, OnlineOptions{}.with_slots(0)); },
                        {"online slots", "got 0"});
  auto bidirectional = make_model({"bilstm", 3, 4, 1});
  expect_error_mentions([&] { OnlineStream stream(*bidirectional, *p.head); },
                        {"OnlineStream model", "bidirectional"});
}

// A model that throws midway (NOTE [ Generators on failure ]): the generators go back to where
// the failing call found them, and the stream refuses to go on.
TEST(OnlineStream, AFailureMidwayLeavesTheGeneratorsAndEndsTheStream) {
  const StreamProblem p(12, 0.25);
  auto generator_state = [] { return at::detail::getDefaultCPUGenerator().get_state(); };
  auto pushes = [&](OnlineStream& stream, torch::Tensor& before) {
    for (int64_t at = 0; at < 12; at += 2) {
      before = generator_state();
      stream.push(p.x.narrow(0, at, 2).detach(), p.y.narrow(0, at, 2));
    }
  };
  // How many calls of the model the pushes make: a failure after them is finish()'s.
  auto counting = std::make_shared<testing::ThrowsOnCall>(p.model, -1);
  OnlineStream dry_run(*counting, *p.head, OnlineOptions{}.with_slots(2));
  torch::Tensor before;
  pushes(dry_run, before);
  for (int64_t failing : {int64_t(2), counting->calls_ + 2}) {
    auto throwing = std::make_shared<testing::ThrowsOnCall>(p.model, failing);
    OnlineStream stream(*throwing, *p.head, OnlineOptions{}.with_slots(2));
    try {
      pushes(stream, before);
      before = generator_state();
      stream.finish();
      ADD_FAILURE() << "the model's error did not reach the caller";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("ThrowsOnCall"), std::string::npos);
    }
    EXPECT_TRUE(torch::equal(generator_state(), before)) << "failing call " << failing;
    expect_error_mentions([&] { stream.finish(); }, {"finish", "failed midway", "new OnlineStream"});
  }
}

// NOTE [ The stream's random numbers ]: with dropout, a caller who draws between pushes is
// refused; without it, drawing does not matter and the gradient stays exact.
TEST(OnlineStream, RefusesGeneratorsMovedBetweenPushesWhileTheModelDraws) {
  const StreamProblem p(8, 0.25);
  OnlineStream stream(*p.model, *p.head, OnlineOptions{}.with_slots(2));
  stream.push(p.x.narrow(0, 0, 4).detach(), p.y.narrow(0, 0, 4));
  torch::rand({1});
  expect_error_mentions([&] { stream.push(p.x.narrow(0, 4, 4).detach(), p.y.narrow(0, 4, 4)); },
                        {"push", "generators moved", "dropout", "not be exact"});

  const StreamProblem still(8, 0.0);
  const auto reference = still.reference(Reduction::kSum, false);
  still.zero_grads();
  OnlineStream quiet(*still.model, *still.head, OnlineOptions{}.with_slots(2), Reduction::kSum, still.h0);
  quiet.push(still.x.narrow(0, 0, 4), still.y.narrow(0, 0, 4));
  torch::rand({1});
  quiet.push(still.x.narrow(0, 4, 4), still.y.narrow(0, 4, 4));
  expect_close(still.outputs(quiet.finish()), reference, 1e-10, "draws between pushes, no dropout");
}

// After finish() the generators are where one forward pass over the stream leaves them, as
// after full BPTT on it.
TEST(OnlineStream, LeavesTheGeneratorsWhereOneForwardPassWould) {
  const StreamProblem p(11, 0.25);
  p.reference(Reduction::kMean, false, 21);
  const auto after_full = torch::rand({4});
  p.streamed({3, 3, 5}, 2, Reduction::kMean, false, 21);
  EXPECT_TRUE(torch::equal(torch::rand({4}), after_full));
}

}  // namespace
}  // namespace vlrnn
