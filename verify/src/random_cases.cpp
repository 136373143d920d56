#include "vlrnn/verify/random_cases.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"

#include <fmt/format.h>

#include <algorithm>

namespace vlrnn::verify {
namespace {

// SplitMix64: a fixed, portable mixing of 64-bit seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Draws from a stream seeded by a case seed; every draw is a portable function of it.
class Draw {
 public:
  explicit Draw(uint64_t seed) : state_(seed) {}
  uint64_t next() { return state_ = mix(state_); }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }
  bool chance(int64_t percent) { return range(1, 100) <= percent; }
  template <typename T>
  const T& pick(const std::vector<T>& items) { return items[size_t(range(0, int64_t(items.size()) - 1))]; }

 private:
  uint64_t state_;
};

// Lengths for B sequences of T steps: fixed (empty), or variable with or without T present,
// with lengths of 1 drawn often.
std::vector<int64_t> draw_lengths(Draw& draw, int64_t T, int64_t B) {
  const int64_t mode = draw.range(1, 100);
  if (mode <= 40 || T == 1) return {};
  const bool reach_T = mode <= 70;
  const int64_t longest = reach_T ? T : draw.range(1, T - 1);
  std::vector<int64_t> lengths(static_cast<size_t>(B));
  for (auto& len : lengths) len = draw.chance(20) ? 1 : draw.range(1, longest);
  lengths[size_t(draw.range(0, B - 1))] = longest;  // the longest is present
  return lengths;
}

// Resets for B sequences of T steps (NOTE [ Resets ] in vlrnn/core/sequence.h): none in
// most cases; else each step of each sequence starts a segment with a drawn chance, often
// in adjacent steps, sometimes at step 0 or past the sequence's end (all change nothing
// there). Drawn from a stream of their own, so a case's other draws are what they were
// before resets existed.
std::vector<std::vector<int64_t>> draw_segment_starts(uint64_t case_seed, const VerifyCase& c) {
  Draw draw(mix(case_seed ^ 0x7E5E7ull));
  if (c.time_steps < 2 || !draw.chance(30)) return {};
  const int64_t percent = draw.pick<int64_t>({3, 10, 30, 60});
  std::vector<std::vector<int64_t>> starts(size_t(c.batch));
  for (auto& sequence : starts) {
    for (int64_t t = 0; t < c.time_steps; ++t) {
      if (draw.chance(percent)) sequence.push_back(t);
    }
  }
  return starts;
}

// The methods' options, drawn for a sequence of T steps. A method the registry gains later
// runs with its defaults.
std::string draw_method_spec(Draw& draw, const std::string& method, int64_t T) {
  if (method == "vlrnn") {
    const int64_t k = draw.chance(60) ? draw.range(1, std::min<int64_t>(T, 16)) : draw.range(1, T + 5);
    return fmt::format("vlrnn:block_length={}", k);
  }
  if (method == "checkpoint") {
    return fmt::format("checkpoint:segments={},head_inside={}", draw.range(1, T),
                       draw.chance(70) ? 1 : 0);
  }
  if (method == "revolve") return fmt::format("revolve:slots={}", draw.range(1, 8));
  if (method == "online") return fmt::format("online:slots={}", draw.range(1, 8));
  if (method == "bivlrnn") {
    if (draw.chance(25)) {  // K chosen under a budget
      return fmt::format("bivlrnn:percent={}", draw.pick<int64_t>({1, 10, 30, 100}));
    }
    const int64_t k = draw.chance(60) ? draw.range(1, std::min<int64_t>(T, 16)) : draw.range(1, T + 5);
    return fmt::format("bivlrnn:block_length={}", k);
  }
  if (method == "planner") {
    return fmt::format("planner:percent={}", draw.pick<int64_t>({1, 3, 10, 30, 100}));
  }
  return method;
}

}  // namespace

uint64_t random_case_seed(uint64_t seed, int64_t index) {
  return mix(mix(seed) ^ uint64_t(index)) % 1000000000000ull;  // short enough to type
}

std::vector<VerifyCase> random_configuration(uint64_t case_seed) {
  Draw draw(case_seed);
  VerifyCase c;
  c.seed = case_seed;
  const bool large = draw.chance(10);  // NOTE [ Random case sizes ]
  c.time_steps = large ? draw.range(200, 600) : (draw.chance(5) ? 1 : draw.range(2, 60));
  c.hidden_size = large ? draw.range(32, 128) : draw.range(1, 16);
  c.input_size = large ? draw.range(8, 32) : draw.range(1, 8);
  c.batch = large ? draw.range(4, 16) : draw.range(1, 6);
  c.model = draw.pick(model_kinds());
  // A left-to-right kind is sometimes wrapped as a bidirectional one ("bi:<kind>").
  if (!is_bidirectional_kind(c.model) && draw.chance(10)) c.model = kBidirectionalPrefix + c.model;
  const bool stacks = c.model.find("gru_lstm") == std::string::npos;  // the composite's layers are fixed
  c.num_layers = stacks ? draw.range(1, large ? 2 : 3) : 1;
  if ((c.num_layers > 1 || !stacks) && draw.chance(50)) {
    c.dropout = double(draw.range(1, 5)) / 10.0;
  }
  c.head = draw.chance(50) ? "ce" : "mse";
  c.reduction = draw.chance(50) ? "mean" : "sum";
  c.dtype = draw.chance(60) ? torch::kFloat64 : torch::kFloat32;
  c.h0_with_grad = draw.chance(50);
  c.inputs_with_grad = draw.chance(60);
  c.lengths = draw_lengths(draw, c.time_steps, c.batch);
  c.segment_starts = draw_segment_starts(case_seed, c);

  std::vector<VerifyCase> cases;
  for (const auto& method : method_names()) {
    if (method == "full" || !make_method(method)->is_exact()) continue;
    if (!method_takes_model(method, c.model)) continue;
    VerifyCase with_method = c;
    with_method.method = draw_method_spec(draw, method, c.time_steps);
    cases.push_back(with_method);
  }
  return cases;
}

std::string random_case_command(const VerifyCase& c) {
  return fmt::format("build/vlrnn verify --random-case {} --filter '{}'{}", c.seed, c.method,
                     c.device.is_cpu() ? "" : " --device " + c.device.str());
}

}  // namespace vlrnn::verify
