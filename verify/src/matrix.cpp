#include "vlrnn/verify/matrix.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vlrnn::verify {

namespace {

// The option values each method is verified with; a method not listed here is verified
// with its defaults only.
std::vector<std::string> method_variants(const std::string& method, int64_t time_steps) {
  if (method == "vlrnn") {
    std::vector<std::string> specs;
    // K = 1, 2, 7 (divides T = 28), 5 (does not), T, and beyond T.
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(7), int64_t(5), time_steps, time_steps + 12}) {
      specs.push_back(fmt::format("vlrnn:block_length={}", k));
    }
    return specs;
  }
  if (method == "checkpoint") {
    const auto root = sqrt_steps(time_steps);
    return {"checkpoint:segments=1", "checkpoint:segments=2",
            fmt::format("checkpoint:segments={}", root),
            fmt::format("checkpoint:segments={}", time_steps),
            fmt::format("checkpoint:segments={},head_inside=0", root)};
  }
  // Schedule-based methods (vlrnn/schedule/): one variant each keeps verify quick; the
  // schedule tests (tests/schedule) cover more (revolve with one slot, other budgets).
  if (method == "revolve") return {"revolve:slots=3"};
  // T = 28 is past β(3, 2) = 10 steps: the rule drops dispensable states and raises levels.
  if (method == "online") return {"online:slots=3"};
  // percent is raised to the minimum feasible budget when below it: 1% nests recomputation;
  // at 90% the planner keeps tapes (NOTE [ Kept tapes ]) on the single-layer LSTM (on the
  // measured costs of this machine: tests/schedule/test_kept_tapes.cpp forces the case).
  if (method == "planner") return {"planner:percent=1", "planner:percent=90"};
  if (method == "bivlrnn") {
    std::vector<std::string> specs;
    for (int64_t k : {int64_t(1), int64_t(7), int64_t(5), time_steps, time_steps + 12}) {
      specs.push_back(fmt::format("bivlrnn:block_length={}", k));
    }
    specs.push_back("bivlrnn:percent=30");  // K chosen under a budget, by measurement
    return specs;
  }
  if (method == "tbptt") {
    return {"tbptt:k=1", "tbptt:k=7", fmt::format("tbptt:k={}", time_steps), "tbptt:k1=4,k2=10"};
  }
  return {method};
}

// The reduced grid the GRU variants run on: of `method`'s variants, those whose last option
// is 1, 7 or T (K = 1, 7, T for vlrnn); all of them when none has such an option.
std::vector<std::string> reduced_method_variants(const std::string& method, int64_t time_steps) {
  const auto all = method_variants(method, time_steps);
  std::vector<std::string> kept;
  for (const auto& spec : all) {
    const auto eq = spec.rfind('=');
    if (eq == std::string::npos) continue;
    const std::string value = spec.substr(eq + 1);
    for (int64_t k : {int64_t(1), int64_t(7), time_steps}) {
      if (value == std::to_string(k)) {
        kept.push_back(spec);
        break;
      }
    }
  }
  return kept.empty() ? all : kept;
}

struct ModelShape {
  std::string kind;
  int64_t layers;
  std::string head;
  double dropout;
};

// One batch's lengths: empty (every sequence T long) or one per sequence; `tail`: no
// sequence reaches T (a batch padded to a bucket length).
struct LengthSet {
  std::vector<int64_t> lengths;
  bool tail = false;
  std::vector<std::vector<int64_t>> segment_starts;  // empty: no resets
};

// Every sequence T long; mixed lengths, unsorted, one of length 1, one shorter than most
// blocks, one of length T; and the same with no sequence reaching T, so that whole blocks
// at the end hold only padding. At T = 28: {17, 28, 1, 4} and {17, 9, 1, 4}.
std::vector<LengthSet> default_length_sets(int64_t T, int64_t B) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t most = std::min(ceil_div(6 * T, 10), std::max<int64_t>(T - 1, 1));
  const std::vector<int64_t> mixed = {most, T, 1, ceil_div(T, 7)};
  const std::vector<int64_t> short_of_T = {most, std::max<int64_t>(T / 3, 1), 1, ceil_div(T, 7)};
  std::vector<LengthSet> sets = {{{}, false, {}}};
  auto repeat = [B](const std::vector<int64_t>& pattern) {
    std::vector<int64_t> lengths(static_cast<size_t>(B));
    for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = pattern[i % pattern.size()];
    return lengths;
  };
  if (B >= 2) sets.push_back({repeat(mixed), false, {}});  // B = 1: the same as all T
  auto tail = repeat(short_of_T);
  if (*std::max_element(tail.begin(), tail.end()) < T) sets.push_back({tail, true, {}});
  return sets;
}

// Mixed lengths (as default_length_sets()) with resets (NOTE [ Resets ] in
// vlrnn/core/sequence.h) at step 0, in two adjacent steps, at a sequence's last step and
// inside a padded tail, the others spread over the sequences. At T = 28, B = 4: lengths
// {17, 28, 1, 4}, segment starts {0, 5, 6, 16, 20}, {9, 27}, {3}, {1, 2}.
LengthSet reset_length_set(int64_t T, int64_t B) {
  const auto sets = default_length_sets(T, B);
  LengthSet set = sets.size() > 1 && !sets[1].tail ? sets[1] : sets[0];
  auto lengths = set.lengths;
  if (lengths.empty()) lengths.assign(size_t(B), T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[size_t(b)], third = std::max<int64_t>(len / 3, 1);
    switch (b % 4) {
      case 0: set.segment_starts.push_back({0, third, third + 1, len - 1, len + 3}); break;
      case 1: set.segment_starts.push_back({third, len - 1}); break;
      case 2: set.segment_starts.push_back({len + 2}); break;
      default: set.segment_starts.push_back({1, 2}); break;
    }
    for (auto& t : set.segment_starts.back()) t = std::min(t, T);
  }
  return set;
}

// B lengths uniform in [ceil(f T), T], one of them T, a portable function of `seed`
// (SplitMix64, no std:: distributions, whose output differs between standard libraries).
std::vector<int64_t> drawn_lengths(double f, int64_t T, int64_t B, uint64_t seed) {
  const int64_t shortest = std::clamp<int64_t>(int64_t(std::ceil(f * double(T))), 1, T);
  std::vector<int64_t> lengths(static_cast<size_t>(B));
  uint64_t x = seed;
  for (auto& len : lengths) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    len = shortest + int64_t(z % uint64_t(T - shortest + 1));
  }
  lengths[0] = T;  // the batch spans all T steps
  return lengths;
}

// Every case of `shapes` × `specs` × {sum, mean} × `dtypes` × {h0 with grad, h0 absent} ×
// `length_sets`, from `base`.
void add_cases(std::vector<VerifyCase>& cases, const VerifyCase& base,
               const std::vector<ModelShape>& shapes, const std::vector<std::string>& specs,
               const std::vector<LengthSet>& length_sets,
               const std::vector<torch::ScalarType>& dtypes = {torch::kFloat64,
                                                               torch::kFloat32}) {
  for (const auto& spec : specs) {
    for (const auto& m : shapes) {
      for (const char* reduction : {"sum", "mean"}) {
        for (auto dtype : dtypes) {
          for (bool h0_with_grad : {true, false}) {
            for (const auto& set : length_sets) {
              VerifyCase c = base;
              c.lengths = set.lengths;
              c.segment_starts = set.segment_starts;
              if (!set.lengths.empty()) c.batch = int64_t(set.lengths.size());
              // The padded tail runs with and without dL/dx asked for (paired with the h0
              // mode, so the matrix does not double): a block no sequence reaches gets no
              // input gradient at all.
              if (set.tail) c.inputs_with_grad = h0_with_grad;
              c.model = m.kind;
              c.num_layers = m.layers;
              c.dropout = m.dropout;
              c.head = m.head;
              c.method = spec;
              c.reduction = reduction;
              c.dtype = dtype;
              c.h0_with_grad = h0_with_grad;
              cases.push_back(c);
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::vector<VerifyCase> default_matrix() {
  const std::vector<ModelShape> models = {
      {"rnn", 1, "ce", 0.0},      {"gru", 1, "mse", 0.0},      {"lstm", 1, "ce", 0.0},
      {"lstm", 3, "mse", 0.0},    {"gru_lstm", 1, "ce", 0.0},  {"lstm", 3, "ce", 0.3},
      {"gru_lstm", 1, "mse", 0.25}};
  // The cells with a hand-written block backward (GRU variants, vlrnn/cells/gru_block.h;
  // lstm_block, vlrnn/cells/lstm_block.h), also stacked with dropout, on the reduced grid
  // of reduced_method_variants().
  const std::vector<ModelShape> gru_variants = {
      {"gru_v1", 1, "ce", 0.0}, {"gru_v2", 1, "mse", 0.0}, {"gru_v3", 1, "ce", 0.0},
      {"gru_v4", 1, "mse", 0.0}, {"gru_v4", 2, "ce", 0.25}, {"lstm_block", 1, "ce", 0.0},
      {"lstm_block", 3, "mse", 0.3}};
  // Bidirectional models (vlrnn/core/bidirectional.h): one layer, a wrapper whose directions
  // draw dropout per step, and a stack with dropout between layers; for the methods that
  // take them (checkpoint, bivlrnn, the planner).
  const std::vector<ModelShape> bidirectional = {
      {"bilstm", 1, "ce", 0.0}, {"bigru", 1, "mse", 0.0}, {"bi:lstm", 2, "ce", 0.3},
      {"bilstm", 2, "mse", 0.25}};
  // The linear recurrences run by an in-block scan (vlrnn/cells/linear_recurrence.h), one of
  // them stacked with dropout, on the same reduced grid.
  // Resets (NOTE [ Resets ] in vlrnn/core/sequence.h) on stacks with dropout, the composite
  // state, a hand-written block cell and a scan, and two bidirectional models; float64 only.
  const std::vector<ModelShape> with_resets = {
      {"lstm", 3, "ce", 0.3}, {"gru_lstm", 1, "mse", 0.25}, {"lstm_block", 2, "ce", 0.3},
      {"mingru", 1, "mse", 0.0}};
  const std::vector<ModelShape> bidirectional_with_resets = {
      {"bilstm", 2, "mse", 0.25}, {"bigru", 1, "ce", 0.0}};
  const std::vector<ModelShape> linear_recurrences = {
      {"mingru", 1, "ce", 0.0}, {"minlstm", 2, "mse", 0.3}, {"lru", 1, "mse", 0.0},
      {"ssm", 1, "ce", 0.0}};
  std::vector<VerifyCase> cases;
  const VerifyCase base;
  const auto length_sets = default_length_sets(base.time_steps, 4);
  const auto reset_set = reset_length_set(base.time_steps, 4);
  for (const auto& method : method_names()) {
    if (method == "full") continue;
    if (handles_left_to_right(method)) {
      add_cases(cases, base, models, method_variants(method, base.time_steps), length_sets);
      add_cases(cases, base, gru_variants, reduced_method_variants(method, base.time_steps),
                length_sets);
      add_cases(cases, base, linear_recurrences,
                reduced_method_variants(method, base.time_steps), length_sets);
      add_cases(cases, base, with_resets, reduced_method_variants(method, base.time_steps),
                {reset_set}, {torch::kFloat64});
    }
    if (handles_bidirectional(method)) {
      add_cases(cases, base, bidirectional, method_variants(method, base.time_steps),
                length_sets);
      add_cases(cases, base, bidirectional_with_resets,
                reduced_method_variants(method, base.time_steps), {reset_set}, {torch::kFloat64});
    }
  }
  return cases;
}

std::vector<VerifyCase> model_matrix(const std::string& kind, const ModelGrid& grid) {
  TORCH_CHECK(grid.time_steps >= 1, "T: expected >= 1 time steps, got ", grid.time_steps);
  TORCH_CHECK(grid.batch >= 0, "batch: expected >= 1 sequences (0: the default), got ", grid.batch);
  TORCH_CHECK(grid.min_length == 0.0 || (grid.min_length > 0.0 && grid.min_length <= 1.0),
              "min_length: expected a fraction of T in (0, 1], got ", grid.min_length);
  TORCH_CHECK(!grid.dtypes.empty(), "dtypes: expected at least one dtype, got none");
  VerifyCase base;
  base.model = kind;
  base.model_label = grid.label;
  base.num_layers = 1;
  base.time_steps = grid.time_steps;
  if (grid.batch > 0) base.batch = grid.batch;
  base.head = grid.head;
  // A head that fixes its own Z (a head file) gives H; a built-in reads whatever it is given.
  const int64_t z = make_head(grid.head, base.hidden_size, 3)->input_size();
  const bool fixed_z = make_head(grid.head, base.hidden_size + 1, 3)->input_size() == z;
  if (fixed_z) base.hidden_size = z;
  // The model's own F (and H): a TorchScript file fixes them whatever the config asks.
  const auto model = make_model({kind, base.input_size, base.hidden_size, 1, 0.0});
  base.input_size = model->input_size();
  TORCH_CHECK(!fixed_z || model->output_size() == z, "head \"", grid.head, "\": expected it "
              "to read the model's H = ", model->output_size(), " features per step (model \"",
              kind, "\"), found input_size Z = ", z);
  std::vector<LengthSet> length_sets;
  if (grid.min_length > 0.0) {
    auto lengths = drawn_lengths(grid.min_length, base.time_steps, base.batch, base.seed);
    const bool all_T = std::all_of(lengths.begin(), lengths.end(),
                                   [&](int64_t n) { return n == base.time_steps; });
    length_sets = {{all_T ? std::vector<int64_t>{} : lengths, false, {}}};
  } else {
    length_sets = default_length_sets(base.time_steps, grid.batch > 0 ? grid.batch : 4);
  }
  const ModelShape shape{kind, 1, grid.head, 0.0};
  std::vector<VerifyCase> cases;
  if (!grid.methods.empty()) {
    std::vector<std::string> specs;
    for (const auto& spec : grid.methods) {
      if (spec != "full") specs.push_back(spec);  // the reference itself
    }
    add_cases(cases, base, {shape}, specs, length_sets, grid.dtypes);
    return cases;
  }
  const bool bidirectional = as_bidirectional(*model) != nullptr;
  for (const auto& method : method_names()) {
    if (method == "full") continue;
    if (bidirectional ? !handles_bidirectional(method) : !handles_left_to_right(method)) continue;
    add_cases(cases, base, {shape}, reduced_method_variants(method, base.time_steps),
              length_sets, grid.dtypes);
  }
  return cases;
}

}  // namespace vlrnn::verify
