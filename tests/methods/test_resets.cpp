// Resets inside a sequence (NOTE [ Resets ] in vlrnn/core/sequence.h): a batch whose
// sequences restart at given steps against the same segments run as sequences of their own
// (bidirectional models too), and every exact method against full BPTT with resets.
// Float64, 1e-10 relative.
// Shapes: T = 9 steps, B = 3 sequences, F = 3 features, H = 4 hidden; S = segments.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"

namespace vlrnn::resets_test {
namespace {

using testing::expect_close;
using testing::expect_error_mentions;
using testing::Named;

constexpr int64_t kSteps = 9, kBatch = 3, kFeatures = 3, kHidden = 4;

// Resets at step 0 (changes nothing), in adjacent steps (3 and 4: a one-step segment), at
// the last step, and one inside sequence 2's padded tail (changes nothing); lengths 9, 9, 6.
const std::vector<std::vector<int64_t>> kSegmentStarts = {{0, 3, 4}, {5, 8}, {2, 7}};
const std::vector<int64_t> kLengths = {9, 9, 6};

struct Problem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  torch::Tensor x, y, lengths, resets;  // [T, B, F], [T, B], [B], [T, B]
  State h0, seed;                       // the initial state; dL/d(final state)

  Problem(const std::string& kind, int64_t layers, double dropout = 0.0) {
    torch::manual_seed(5);
    model = make_model({kind, kFeatures, kHidden, layers, dropout});
    model->to(torch::kFloat64);
    head = make_head("ce", model->output_size(), 3);
    head->to(torch::kFloat64);
    x = torch::randn({kSteps, kBatch, kFeatures}, torch::kFloat64);
    y = torch::randint(0, 3, {kSteps, kBatch}, torch::kLong);
    lengths = torch::tensor(kLengths, torch::kLong);
    resets = resets_from_segment_starts(kSegmentStarts, kSteps);
    h0 = testing::random_state(*model, kBatch);
    seed = testing::random_state(*model, kBatch);
  }

  void zero_grads() const { testing::clear_grads(*model, *head); }
  Named gradients(const State& h0_leaves, const torch::Tensor& x_leaf) const {
    Named out;
    for (const auto& p : model->named_parameters()) out["model." + p.key()] = p.value().grad().clone();
    for (const auto& p : head->named_parameters()) out["head." + p.key()] = p.value().grad().clone();
    for (size_t i = 0; i < h0_leaves.size(); ++i) out["h0 " + std::to_string(i)] = h0_leaves[i].grad();
    out["x"] = x_leaf.grad();
    return out;
  }

  // `method` on the batch with resets (SUM, h0 and x requiring grad, seeded final state).
  Named with_resets(GradientMethod& method) const {
    zero_grads();
    const State leaves = h0.detached_leaves();
    const auto x_leaf = x.detach().requires_grad_(true);
    Workload w{*model, *head, SequenceBatch{x_leaf, y, lengths}, leaves, Reduction::kSum};
    w.batch.resets = resets;
    w.final_state_grad = seed;
    const auto result = method.compute(w);
    Named out = gradients(leaves, x_leaf);
    out["loss"] = result.loss;
    for (size_t i = 0; i < result.final_state.size(); ++i) {
      out["final " + std::to_string(i)] = result.final_state[i];
    }
    return out;
  }

  // The reference: every segment a sequence of its own (S of them, padded to the longest),
  // starting from its sequence's h0 row, one full-BPTT call; sequence b's final state is its
  // last segment's, and the seed goes there.
  Named as_separate_sequences() const {
    struct Segment { int64_t sequence, begin, end; };
    std::vector<Segment> segments;
    for (int64_t b = 0; b < kBatch; ++b) {
      std::vector<int64_t> cuts{0};
      for (int64_t t : kSegmentStarts[size_t(b)]) {
        if (t > 0 && t < kLengths[size_t(b)]) cuts.push_back(t);
      }
      cuts.push_back(kLengths[size_t(b)]);
      for (size_t k = 0; k + 1 < cuts.size(); ++k) segments.push_back({b, cuts[k], cuts[k + 1]});
    }
    const int64_t S = int64_t(segments.size());
    int64_t longest = 0;
    for (const auto& s : segments) longest = std::max(longest, s.end - s.begin);
    zero_grads();
    const State leaves = h0.detached_leaves();
    const auto x_leaf = x.detach().requires_grad_(true);
    std::vector<torch::Tensor> xs, ys;
    std::vector<int64_t> segment_lengths, rows, last_of_sequence(kBatch), first_of_sequence(kBatch, -1);
    for (int64_t i = 0; i < S; ++i) {
      const auto& s = segments[size_t(i)];
      const int64_t n = s.end - s.begin;
      xs.push_back(torch::constant_pad_nd(x_leaf.narrow(0, s.begin, n).select(1, s.sequence),
                                          {0, 0, 0, longest - n}));  // [longest, F]
      ys.push_back(torch::constant_pad_nd(y.narrow(0, s.begin, n).select(1, s.sequence),
                                          {0, longest - n}));
      segment_lengths.push_back(n);
      rows.push_back(s.sequence);
      last_of_sequence[size_t(s.sequence)] = i;
      if (first_of_sequence[size_t(s.sequence)] < 0) first_of_sequence[size_t(s.sequence)] = i;
    }
    const auto row_index = torch::tensor(rows, torch::kLong);  // [S]
    std::vector<torch::Tensor> entry;
    const auto specs = model->state_spec();
    for (size_t i = 0; i < leaves.size(); ++i) {
      entry.push_back(leaves[i].index_select(specs[i].batch_dim, row_index));
    }
    const auto seg_lengths = torch::tensor(segment_lengths, torch::kLong);
    auto [z, final_state] = model->forward(torch::stack(xs, 1), State(entry), seg_lengths);
    auto losses = head->forward(z, torch::stack(ys, 1));  // [longest, S]
    losses = torch::where(torch::arange(longest).unsqueeze(1) < seg_lengths.unsqueeze(0), losses,
                          torch::zeros_like(losses));
    auto loss = losses.sum();
    // A bidirectional model's backward direction ends at step 0: its final part is the
    // first segment's.
    const auto last = torch::tensor(last_of_sequence, torch::kLong);    // [B]
    const auto first = torch::tensor(first_of_sequence, torch::kLong);  // [B]
    std::vector<torch::Tensor> finals;
    for (size_t i = 0; i < seed.size(); ++i) {
      const bool backward = specs[i].name.size() > 4 &&
                            specs[i].name.compare(specs[i].name.size() - 4, 4, "_bwd") == 0;
      finals.push_back(final_state[i].index_select(specs[i].batch_dim, backward ? first : last));
      loss = loss + (finals.back() * seed[i]).sum();
    }
    loss.backward();
    Named out = gradients(leaves, x_leaf);
    out["loss"] = loss.detach() - [&] {
      auto seeded = torch::zeros({}, torch::kFloat64);
      for (size_t i = 0; i < seed.size(); ++i) seeded = seeded + (finals[i] * seed[i]).sum();
      return seeded.detach();
    }();
    for (size_t i = 0; i < finals.size(); ++i) out["final " + std::to_string(i)] = finals[i].detach();
    return out;
  }
};

// Full BPTT with resets computes what the segments give run as separate sequences.
TEST(Resets, FullBpttEqualsTheSegmentsAsSeparateSequences) {
  for (const auto& [kind, layers] : std::vector<std::pair<std::string, int64_t>>{
           {"lstm", 2}, {"gru_lstm", 1}, {"lstm_block", 2}, {"mingru", 1}, {"bilstm", 2},
           {"bi:gru_v3", 1}}) {
    Problem p(kind, layers);
    auto full = make_method("full");
    expect_close(p.with_resets(*full), p.as_separate_sequences(), 1e-10, kind + " full");
  }
}

// Every exact left-to-right method equals full BPTT with resets, dropout included.
TEST(Resets, EveryExactMethodEqualsFullBptt) {
  const std::vector<std::string> specs = {
      "vlrnn:block_length=1", "vlrnn:block_length=2", "vlrnn:block_length=4", "vlrnn:block_length=20",
      "checkpoint:segments=3", "checkpoint:segments=2,head_inside=0", "revolve:slots=2",
      "planner:percent=1", "planner:percent=90", "online:slots=1", "online:slots=3"};
  testing::expect_every_exact_method_in(specs, "resets");
  Problem p("lstm", 2, /*dropout=*/0.3);
  p.model->train();
  auto full = make_method("full");
  torch::manual_seed(1);
  const Named reference = p.with_resets(*full);
  for (const auto& spec : specs) {
    auto method = make_method_from_spec(spec);
    torch::manual_seed(1);
    expect_close(p.with_resets(*method), reference, 1e-10, spec);
  }
}

// The bidirectional methods: each direction restarts, the backward one at each segment's
// end; dropout between layers.
TEST(Resets, EveryBidirectionalMethodEqualsFullBptt) {
  Problem p("bilstm", 2, /*dropout=*/0.3);
  p.model->train();
  auto full = make_method("full");
  torch::manual_seed(1);
  const Named reference = p.with_resets(*full);
  for (const auto& name : method_names()) {
    if (name == "full" || !make_method(name)->is_exact() || !handles_bidirectional(name)) continue;
    for (const auto& spec : {name, name + ":block_length=2", name + ":segments=4"}) {
      std::unique_ptr<GradientMethod> method;
      try {
        method = make_method_from_spec(spec);
      } catch (const std::exception&) {
        continue;  // an option this method does not take
      }
      torch::manual_seed(1);
      expect_close(p.with_resets(*method), reference, 1e-10, spec);
    }
  }
}

// Truncated BPTT's windows: where every window starts a segment of every sequence, nothing
// crosses a window boundary, so truncation loses nothing and tbptt equals full BPTT.
TEST(Resets, TruncationAtTheResetsLosesNothing) {
  Problem p("gru_lstm", 1);
  p.lengths = torch::Tensor();  // all T: the final state's seed lies in the last window
  p.resets = resets_from_segment_starts({{3, 6}, {3, 6}, {3, 6}}, kSteps);
  auto full = make_method("full");
  auto windows = make_method_from_spec("tbptt:k=3");
  expect_close(p.with_resets(*windows), p.with_resets(*full), 1e-10, "tbptt:k=3");
  // Elsewhere the truncation still shows.
  p.resets = resets_from_segment_starts({{4}, {4}, {4}}, kSteps);
  const Named truncated = p.with_resets(*windows), reference = p.with_resets(*full);
  EXPECT_GT(testing::rel_diff(truncated.at("model.gru.gru.weight_hh_l0"),
                              reference.at("model.gru.gru.weight_hh_l0")), 1e-6);
}

// NOTE [ Resets ]: an h0 computed from a parameter (a learned initial state) gets its
// gradient from every segment, its graph back-propagated once.
TEST(Resets, LearnedInitialStateGetsEverySegmentsGradient) {
  Problem p("gru", 1);
  auto initial = torch::randn({1, 1, kHidden}, torch::kFloat64).requires_grad_(true);
  auto gradient_of_initial = [&](GradientMethod& method) {
    p.zero_grads();
    initial.mutable_grad() = torch::Tensor();
    State h0{torch::tanh(initial).expand({1, kBatch, kHidden})};
    Workload w{*p.model, *p.head, SequenceBatch{p.x, p.y, p.lengths}, h0, Reduction::kMean};
    w.batch.resets = p.resets;
    method.compute(w);
    return initial.grad().clone();
  };
  auto full = make_method("full");
  auto blocks = make_method_from_spec("vlrnn:block_length=2");
  const auto want = gradient_of_initial(*full);
  EXPECT_LE(testing::rel_diff(gradient_of_initial(*blocks), want), 1e-10);
}

// Resets that change nothing (at step 0, past a sequence's end) leave the batch as it was.
TEST(Resets, AtStepZeroAndInThePaddedTailChangeNothing) {
  Problem p("lstm", 1);
  auto full = make_method("full");
  const Named with_none = [&] {
    Problem q("lstm", 1);
    q.resets = torch::zeros({kSteps, kBatch}, torch::kBool);
    return q.with_resets(*full);
  }();
  p.resets = resets_from_segment_starts({{0}, {0}, {0, 6, 8}}, kSteps);  // lengths 9, 9, 6
  expect_close(p.with_resets(*full), with_none, 0.0, "resets that change nothing");
}

TEST(Resets, BadMasksAreRefused) {
  Problem p("lstm", 1);
  auto full = make_method("full");
  auto run = [&](const torch::Tensor& resets) {
    Workload w{*p.model, *p.head, SequenceBatch{p.x, p.y}};
    w.batch.resets = resets;
    full->compute(w);
  };
  expect_error_mentions([&] { run(torch::zeros({kSteps, kBatch + 1}, torch::kBool)); },
                        {"batch.resets", "[T, B] = [9, 3]", "[9, 4]"});
  expect_error_mentions([&] { run(torch::zeros({kSteps, kBatch}, torch::kLong)); },
                        {"batch.resets", "bool", "Long"});
  expect_error_mentions([&] { resets_from_segment_starts({{3, 10}}, kSteps); },
                        {"segment_starts[0]", "[0, T = 9]", "10"});
}

}  // namespace
}  // namespace vlrnn::resets_test
