#include "vlrnn/schedule/bidirectional_vlrnn.h"

// Shape legend: T = time, K = block length, N = blocks, n = steps in a block, B = batch,
// I = a layer's input features, Zf / Zb = the directions' outputs, Z = Zf + Zb, L = layers.

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/methods/progress.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/cost_model_cache.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <map>
#include <numeric>

namespace vlrnn {
namespace {

enum class Direction { kForward, kBackward };

// What one direction of one layer keeps between its no-grad run and its with-grad sweep.
// states[i] is its state at the boundary i·K: for the forward direction the state after
// steps < i·K (block i's entry), for the backward direction the state after steps >= i·K
// (block i - 1's entry). rng[i]: the generators just before the direction ran block i.
struct Boundaries {
  std::vector<State> states;  // N + 1
  std::vector<RngState> rng;  // N
};

// Runs `roots` backward with `seeds`, skipping a root that needs no gradient or gets none.
void backward_from(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& seeds) {
  std::vector<torch::Tensor> used_roots, used_seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i].defined() && roots[i].requires_grad() && seeds[i].defined()) {
      used_roots.push_back(roots[i]);
      used_seeds.push_back(seeds[i]);
    }
  }
  if (!used_roots.empty()) torch::autograd::backward(used_roots, used_seeds);
}

// The gradients at a block's entry leaves (δh), or none for the caller's h0 (whose gradient
// autograd has already put where it belongs).
State entry_grads(const State& entry, bool is_h0) {
  if (is_h0) return State();
  std::vector<torch::Tensor> grads;
  for (const auto& h : entry) grads.push_back(h.grad());
  return State(std::move(grads));
}

// One compute() call: NOTE [ Bidirectional blocks ] in bidirectional_vlrnn.h.
class BidirectionalRun {
 public:
  BidirectionalRun(const Workload& workload, const Bidirectional& model, int64_t block_length,
                   std::vector<int64_t> backward_sweep)
      : w_(workload),
        model_(model),
        T_(workload.batch.time_steps()),
        K_(block_length),
        N_((T_ + K_ - 1) / K_),
        L_(model.num_layers()),
        device_(workload.batch.inputs.device()),
        backward_sweep_(std::move(backward_sweep)),
        inputs_(size_t(L_)),
        masks_(size_t(L_)),
        input_grads_(size_t(L_)),
        seeds_(size_t(L_)),
        forward_(size_t(L_)),
        backward_(size_t(L_)) {
    inputs_[0] = workload.batch.inputs;  // [T, B, F]
    for (int64_t l = 0; l < L_; ++l) {
      auto [h0_f, h0_b] = model.split_state(workload.h0, l);
      h0_.emplace_back(std::move(h0_f), std::move(h0_b));
      // NOTE [ Gradients across calls ]: each direction's sweep starts from its part of the
      // caller's seed, at the block holding its final state (the last block for the forward
      // direction, block 0 for the backward one).
      if (!workload.final_state_grad.empty()) {
        seeds_[size_t(l)] = model.split_state(workload.final_state_grad, l);
      }
    }
    result_.step_losses = torch::zeros({T_, workload.batch.batch_size()},
                                       workload.batch.inputs.options().requires_grad(false));
  }

  GradientResult run() {
    // No-grad pass: the lower layers whole (their outputs are the next layer's inputs),
    // then the top layer's forward direction.
    for (int64_t l = 0; l + 1 < L_; ++l) store_layer_output(l);
    no_grad_pass(L_ - 1, Direction::kForward, /*collect=*/false);
    sweep_top_forward();   // also the top backward direction's no-grad pass
    sweep_top_backward();
    for (int64_t l = L_ - 2; l >= 0; --l) sweep_lower_layer(l);
    if (wants_input_grad(0)) accumulate_input_grad(inputs_[0], input_grads_[0]);
    after_forward_.restore();  // NOTE [ RNG across the no-grad pass ]

    std::vector<std::pair<State, State>> finals;
    for (int64_t l = 0; l < L_; ++l) {
      finals.emplace_back(forward_[size_t(l)].states.back(), backward_[size_t(l)].states.front());
    }
    result_.final_state = model_.join_states(finals).detached();
    result_.loss = loss_;
    // In steps of the whole model (every layer, both directions): each direction of each
    // layer runs once with grad and is back-propagated once; without grad, each direction of
    // a lower layer runs once, the top layer's forward direction twice and its backward
    // direction once.
    const int64_t direction_runs = 2 * L_;
    result_.counters.forward_with_grad = T_;
    result_.counters.backward = T_;
    result_.counters.forward_no_grad =
        ((2 * (L_ - 1) + 3) * T_ + direction_runs - 1) / direction_runs;
    return result_;
  }

 private:
  int64_t begin(int64_t i) const { return i * K_; }
  int64_t size(int64_t i) const { return std::min(K_, T_ - i * K_); }
  bool wants_input_grad(int64_t layer) const {
    return layer > 0 || inputs_[0].requires_grad();
  }
  Boundaries& boundaries(int64_t layer, Direction d) {
    return d == Direction::kForward ? forward_[size_t(layer)] : backward_[size_t(layer)];
  }

  // Block i of one direction of `layer` from `entry`: (z [n, B, Zf or Zb], exit).
  std::pair<torch::Tensor, State> run_block(int64_t layer, Direction d, const torch::Tensor& x,
                                            int64_t i, const State& entry) const {
    const auto lengths = w_.batch.slice(begin(i), size(i)).lengths;  // [B] valid in the block
    const bool forward = d == Direction::kForward;
    const auto restarts = model_.restarts(w_.batch.resets, w_.h0, layer, forward, begin(i), size(i));
    return forward ? model_.run_forward_direction(layer, x, entry, lengths, restarts)
                   : model_.run_backward_direction(layer, x, entry, lengths, restarts);
  }

  // Block i of `layer`'s input: a view, or a leaf whose .grad() is the block's dL/dinput.
  torch::Tensor block_input(int64_t layer, int64_t i) const {
    auto x = inputs_[size_t(layer)].narrow(0, begin(i), size(i));  // [n, B, I]
    return wants_input_grad(layer) ? x.detach().requires_grad_(true) : x;
  }
  void add_input_grad(int64_t layer, int64_t i, const torch::Tensor& x) {
    if (!wants_input_grad(layer) || !x.grad().defined()) return;
    auto& grad = input_grads_[size_t(layer)];
    if (!grad.defined()) grad = torch::zeros_like(inputs_[size_t(layer)], torch::MemoryFormat::Contiguous);
    grad.narrow(0, begin(i), size(i)).add_(x.grad());
  }

  // The entry a with-grad block starts from: the caller's h0 for the direction's first
  // block (its gradient lands where autograd would put it), a detached leaf elsewhere.
  State grad_entry(int64_t layer, Direction d, int64_t i) const {
    const bool first = d == Direction::kForward ? i == 0 : i == N_ - 1;
    if (first) return d == Direction::kForward ? h0_[size_t(layer)].first : h0_[size_t(layer)].second;
    const auto& b = d == Direction::kForward ? forward_[size_t(layer)] : backward_[size_t(layer)];
    return b.states[size_t(d == Direction::kForward ? i : i + 1)].detached_leaves();
  }

  // One direction of `layer` without grad over all blocks in its own order, storing its
  // boundaries; returns its outputs [T, B, Zf or Zb] when `collect`.
  torch::Tensor no_grad_pass(int64_t layer, Direction d, bool collect) {
    torch::NoGradGuard no_grad;
    auto& b = boundaries(layer, d);
    b.states.assign(size_t(N_ + 1), State());
    b.rng.assign(size_t(N_), RngState());
    std::vector<torch::Tensor> outputs(static_cast<size_t>(N_));
    const bool forward = d == Direction::kForward;
    b.states[size_t(forward ? 0 : N_)] =
        forward ? h0_[size_t(layer)].first : h0_[size_t(layer)].second;
    for (int64_t k = 0; k < N_; ++k) {
      const int64_t i = forward ? k : N_ - 1 - k;
      b.rng[size_t(i)] = RngState::capture(device_);
      auto [z, exit] = run_block(layer, d, inputs_[size_t(layer)].narrow(0, begin(i), size(i)), i,
                                 b.states[size_t(forward ? i : i + 1)]);
      b.states[size_t(forward ? i + 1 : i)] = exit.compacted();  // NOTE [ Stored states are compact ]
      if (collect) outputs[size_t(i)] = z;
    }
    return collect ? torch::cat(outputs, 0) : torch::Tensor();
  }

  // A lower layer's output sequence, after its dropout: the next layer's input.
  void store_layer_output(int64_t layer) {
    auto zf = no_grad_pass(layer, Direction::kForward, true);   // [T, B, Zf]
    auto zb = no_grad_pass(layer, Direction::kBackward, true);  // [T, B, Zb]
    torch::NoGradGuard no_grad;
    auto z = torch::cat({zf, zb}, -1);  // [T, B, Z]
    masks_[size_t(layer)] = model_.draw_dropout_masks(layer, T_, z.size(1), z.options());
    inputs_[size_t(layer + 1)] = masks_[size_t(layer)].defined() ? z * masks_[size_t(layer)] : z;
  }

  // NOTE [ Bidirectional blocks ], step 2: the top layer's forward direction with grad,
  // blocks last to first, the backward direction's no-grad run alongside.
  void sweep_top_forward() {
    const int64_t top = L_ - 1;
    auto& chain = backward_[size_t(top)];
    chain.states.assign(size_t(N_ + 1), State());
    chain.rng.assign(size_t(N_), RngState());
    chain.states[size_t(N_)] = h0_[size_t(top)].second;
    RngState chain_rng = RngState::capture(device_);  // where the forward direction's pass left it
    State delta = seeds_[size_t(top)].first;
    for (int64_t i = N_ - 1; i >= 0; --i) {
      const int64_t t0 = begin(i), n = size(i);
      torch::Tensor zb;  // [n, B, Zb]
      {
        torch::NoGradGuard no_grad;
        chain.rng[size_t(i)] = chain_rng;
        chain_rng.restore();
        auto [z, exit] = run_block(top, Direction::kBackward, inputs_[size_t(top)].narrow(0, t0, n),
                                   i, chain.states[size_t(i + 1)]);
        zb = z;
        chain.states[size_t(i)] = exit.compacted();  // NOTE [ Stored states are compact ]
        chain_rng = RngState::capture(device_);
      }
      forward_[size_t(top)].rng[size_t(i)].restore();
      const State entry = grad_entry(top, Direction::kForward, i);
      const auto x = block_input(top, i);
      auto [zf, exit] = run_block(top, Direction::kForward, x, i, entry);
      auto head = head_loss(w_, torch::cat({zf, zb}, -1), t0, n);
      result_.step_losses.narrow(0, t0, n).copy_(head.step_losses);
      loss_ = loss_.defined() ? loss_ + head.loss.detach() : head.loss.detach();
      backward_block(BlockForward{head.loss, head.step_losses, exit}, delta);
      delta = entry_grads(entry, i == 0);
      add_input_grad(top, i, x);
    }
    after_forward_ = chain_rng;  // both directions' draws done: where one forward pass ends
  }

  // NOTE [ Bidirectional blocks ], step 3: the top layer's backward direction with grad,
  // blocks first to last, the forward direction rerun without grad; only dL/dzb is taken
  // from the head.
  void sweep_top_backward() {
    const int64_t top = L_ - 1;
    State delta = seeds_[size_t(top)].second;
    for (const int64_t i : backward_sweep_) {
      const int64_t t0 = begin(i), n = size(i);
      torch::Tensor zf;  // [n, B, Zf]
      {
        torch::NoGradGuard no_grad;
        forward_[size_t(top)].rng[size_t(i)].restore();
        zf = run_block(top, Direction::kForward, inputs_[size_t(top)].narrow(0, t0, n), i,
                       forward_[size_t(top)].states[size_t(i)]).first;
      }
      backward_[size_t(top)].rng[size_t(i)].restore();
      const State entry = grad_entry(top, Direction::kBackward, i);
      const auto x = block_input(top, i);
      auto [zb, exit] = run_block(top, Direction::kBackward, x, i, entry);
      auto zb_leaf = zb.detach().requires_grad_(true);
      auto head = head_loss(w_, torch::cat({zf, zb_leaf}, -1), t0, n);
      auto dzb = torch::autograd::grad({head.loss}, {zb_leaf}, {}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true)[0];
      std::vector<torch::Tensor> roots{zb}, seeds{dzb};
      for (size_t k = 0; k < delta.size(); ++k) {
        roots.push_back(exit[k]);
        seeds.push_back(delta[k]);
      }
      backward_from(roots, seeds);
      delta = entry_grads(entry, i == N_ - 1);
      add_input_grad(top, i, x);
    }
  }

  // A lower layer: dL/d(its output) is known whole (the layer above's input gradient,
  // through the dropout mask), so each direction is back-propagated in one sweep.
  void sweep_lower_layer(int64_t layer) {
    auto grad_out = input_grads_[size_t(layer + 1)];  // [T, B, Z]
    if (!grad_out.defined()) grad_out = torch::zeros_like(inputs_[size_t(layer + 1)]);
    if (masks_[size_t(layer)].defined()) grad_out = grad_out * masks_[size_t(layer)];
    const int64_t zf_size = model_.forward_module(layer).output_size();
    const auto grad_f = grad_out.narrow(-1, 0, zf_size);
    const auto grad_b = grad_out.narrow(-1, zf_size, grad_out.size(-1) - zf_size);
    std::vector<int64_t> last_to_first(static_cast<size_t>(N_));
    std::iota(last_to_first.rbegin(), last_to_first.rend(), 0);
    for (const Direction d : {Direction::kForward, Direction::kBackward}) {
      const bool forward = d == Direction::kForward;
      State delta = forward ? seeds_[size_t(layer)].first : seeds_[size_t(layer)].second;
      for (const int64_t i : forward ? last_to_first : backward_sweep_) {
        boundaries(layer, d).rng[size_t(i)].restore();
        const State entry = grad_entry(layer, d, i);
        const auto x = block_input(layer, i);
        auto [z, exit] = run_block(layer, d, x, i, entry);
        std::vector<torch::Tensor> roots{z};
        std::vector<torch::Tensor> seeds{(forward ? grad_f : grad_b).narrow(0, begin(i), size(i))};
        for (size_t k = 0; k < delta.size(); ++k) {
          roots.push_back(exit[k]);
          seeds.push_back(delta[k]);
        }
        backward_from(roots, seeds);
        delta = entry_grads(entry, forward ? i == 0 : i == N_ - 1);
        add_input_grad(layer, i, x);
      }
    }
    // The layer above is done: free what only it needed.
    inputs_[size_t(layer + 1)] = masks_[size_t(layer)] = input_grads_[size_t(layer + 1)] = torch::Tensor();
  }

  const Workload& w_;
  const Bidirectional& model_;
  const int64_t T_, K_, N_, L_;
  const torch::Device device_;
  const std::vector<int64_t> backward_sweep_;
  std::vector<torch::Tensor> inputs_;       // per layer: [T, B, I] (layer 0: the batch's)
  std::vector<torch::Tensor> masks_;        // per lower layer: [T, B, Z] dropout, or none
  std::vector<torch::Tensor> input_grads_;  // per layer: [T, B, I] dL/dinput, when wanted
  std::vector<std::pair<State, State>> h0_;  // per layer: (forward, backward) parts of h0
  std::vector<std::pair<State, State>> seeds_;  // per layer: the parts of final_state_grad
  std::vector<Boundaries> forward_, backward_;
  RngState after_forward_;
  torch::Tensor loss_;
  GradientResult result_;
};

// The peaks measured so far, K -> measured iteration peak (bytes), and the fit through three of
// them: peak(K) = f + a K + c N(K), N(K) = ceil(T / K) (NOTE [ Choosing K under a budget ]).
class PeakFit {
 public:
  PeakFit(int64_t time_steps, const std::map<int64_t, int64_t>& probes) : T_(time_steps) {
    std::vector<std::array<double, 3>> rows;  // (K, N, peak)
    for (const auto& [K, peak] : probes) rows.push_back({double(K), double(blocks(K)), double(peak)});
    if (rows.size() == 3) {
      // Cramer's rule on [1 K N] (f a c)^T = peak.
      auto det = [&](int column) {
        double m[3][3];
        for (int r = 0; r < 3; ++r) {
          m[r][0] = 1.0, m[r][1] = rows[r][0], m[r][2] = rows[r][1];
          if (column >= 0) m[r][column] = rows[r][2];
        }
        return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
               m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
               m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
      };
      const double d = det(-1);
      if (std::abs(d) > 1e-9) {
        f_ = det(0) / d, a_ = det(1) / d, c_ = det(2) / d;
        return;
      }
    }
    // Too few distinct probes (T <= 2: they are every K there is) or none independent:
    // predict the largest peak seen everywhere, and let the measured checks decide.
    for (const auto& row : rows) f_ = std::max(f_, row[2]);
  }
  double at(int64_t K) const { return f_ + a_ * double(K) + c_ * double(blocks(K)); }

 private:
  int64_t blocks(int64_t K) const { return (T_ + K - 1) / K; }
  int64_t T_;
  double f_ = 0.0, a_ = 0.0, c_ = 0.0;
};

// The iteration peak of bivlrnn at block length K on `workload`.
int64_t peak_at_block_length(const Workload& workload, int64_t K) {
  BidirectionalVlrnn method(BidirectionalVlrnnOptions().with_block_length(K));
  return schedule::measured_iteration_peak(method, workload);
}

// Full BPTT's iteration peak, as measure_iteration reports it: one block of all T steps on
// the one executor, which runs a bidirectional model on the whole sequence as full BPTT does,
// less what the executor holds beyond plain full BPTT (and so beyond the generator snapshot
// measured_iteration_peak adds for a caller's step), so a percentage never exceeds P % of it.
int64_t full_bptt_peak(const Workload& workload) {
  const int64_t T = workload.batch.time_steps();
  schedule::ScheduleMethod full("full", "full", [T](const Workload&) {
    return schedule::uniform_schedule(T, T);
  });
  return schedule::measured_iteration_peak(full, workload) -
         schedule::executor_bytes_beyond_full_bptt(workload);
}

const Bidirectional& checked_model(const Workload& workload) {
  const auto* model = as_bidirectional(workload.model);
  TORCH_CHECK(model, "bivlrnn: expected a bidirectional model (bilstm, bigru, bi:<kind>, or a "
              "vlrnn::Bidirectional), got ", workload.model.describe(),
              "; for a left-to-right model use vlrnn");
  return *model;
}

}  // namespace

BidirectionalVlrnn::BidirectionalVlrnn(BidirectionalVlrnnOptions options)
    : options_(options), blocks_(VlrnnOptions{options.block_length, options.num_blocks}) {
  TORCH_CHECK(options.budget_bytes >= 0, "bivlrnn budget: expected a number of bytes >= 1, got ",
              options.budget_bytes);
  TORCH_CHECK(std::isfinite(options.budget_percent) && options.budget_percent >= 0.0,
              "bivlrnn percent: expected a percentage of full BPTT's peak > 0, got ",
              options.budget_percent);
  TORCH_CHECK(!(options.budget_bytes > 0 && options.budget_percent > 0.0),
              "bivlrnn: give budget (bytes) or percent, not both");
  TORCH_CHECK(!options.budgeted() || (options.block_length == 0 && options.num_blocks == 0),
              "bivlrnn: give block_length or num_blocks or a budget (budget or percent), "
              "not both: under a budget it chooses K itself");
}

std::string BidirectionalVlrnn::describe() const {
  if (!options_.budgeted()) return "bi" + blocks_.describe();  // "bivlrnn(K=64)"
  std::string budget = options_.budget_bytes > 0
                           ? fmt::format("budget={}", options_.budget_bytes)
                           : fmt::format("{}% of full", options_.budget_percent);
  if (signature_.empty()) return fmt::format("bivlrnn({})", budget);
  if (raised_) {
    budget += fmt::format(", raised to {} bytes: the smallest peak measured", budget_);
  }
  return fmt::format("bivlrnn({}: K={})", budget, chosen_K_);
}

int64_t BidirectionalVlrnn::block_length_for(const Workload& workload) const {
  if (!options_.budgeted()) return blocks_.block_length_for(workload);
  const int64_t time_steps = workload.batch.time_steps();
  TORCH_CHECK(!signature_.empty() && chosen_T_ == time_steps, "bivlrnn: under a budget K is "
              "chosen per workload by prepare(); it has not prepared one of T = ", time_steps,
              " steps", signature_.empty() ? std::string() : fmt::format(" (it did T = {})", chosen_T_));
  return chosen_K_;
}

std::vector<int64_t> BidirectionalVlrnn::backward_direction_sweep(int64_t num_blocks) const {
  std::vector<int64_t> order(static_cast<size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// NOTE [ Choosing K under a budget ] in the header.
void BidirectionalVlrnn::prepare_impl(const Workload& workload) {
  const PausedProgress paused;  // its measurements are its own runs
  if (!options_.budgeted()) return;
  checked_model(workload);
  const auto sig = schedule::workload_signature(workload);
  if (sig == signature_) return;
  signature_.clear();  // a failed choice leaves nothing behind
  const int64_t T = workload.batch.time_steps();
  int64_t budget = options_.budget_bytes > 0
                       ? options_.budget_bytes
                       : int64_t(double(full_bptt_peak(workload)) * options_.budget_percent / 100.0);

  bool raised = false;
  std::map<int64_t, int64_t> peaks;  // K -> measured iteration peak
  auto peak = [&](int64_t K) {
    auto it = peaks.find(K);
    return it != peaks.end() ? it->second : peaks[K] = peak_at_block_length(workload, K);
  };
  const int64_t K0 = sqrt_steps(T);
  for (const int64_t K : {std::max<int64_t>(1, K0 / 2), K0, std::min(T, 2 * K0)}) peak(K);
  const PeakFit fit(T, peaks);

  // lo: the largest K measured to fit (0: none yet); hi: the smallest K above it measured
  // not to (T + 1: none).
  int64_t lo = 0, hi = T + 1;
  auto bound = [&] {
    lo = 0, hi = T + 1;
    for (const auto& [K, p] : peaks) {
      if (p <= budget) lo = K;
    }
    for (const auto& [K, p] : peaks) {
      if (p > budget && K > lo) hi = std::min(hi, K);
    }
  };
  bound();
  if (lo == 0) {
    int64_t k_min = 1;
    for (int64_t K = 2; K <= T; ++K) {
      if (fit.at(K) < fit.at(k_min)) k_min = K;
    }
    peak(k_min);
    bound();
    // The fit is smooth, the peaks need not be: from the least peak measured, its unmeasured
    // neighbours, down to a local minimum of the measured peaks (NOTE [ Choosing K under a
    // budget ], step 3).
    for (int64_t walk = 0; lo == 0 && walk < kBudgetChecks; ++walk) {
      const int64_t least = std::min_element(peaks.begin(), peaks.end(), [](const auto& x, const auto& y) {
        return x.second < y.second;
      })->first;
      int64_t next = 0;
      for (const int64_t K : {least - 1, least + 1}) {
        if (next == 0 && K >= 1 && K <= T && peaks.count(K) == 0) next = K;
      }
      if (next == 0) break;  // both neighbours measured, and higher
      peak(next);
      bound();
    }
  }
  if (lo == 0) {
    const auto smallest = std::min_element(peaks.begin(), peaks.end(), [](const auto& x, const auto& y) {
      return x.second < y.second;
    });
    TORCH_CHECK(options_.budget_bytes == 0, "bivlrnn budget: ", budget, " bytes is below the "
                "smallest iteration peak measured for any block length on this workload, ",
                smallest->second, " bytes at K = ", smallest->first, " (of T = ", T,
                " steps); raise budget to at least ", smallest->second);
    budget = smallest->second;  // a percentage is raised to it, as the planner raises one
    raised = true;
    bound();
  }
  double margin = 0.0;
  for (int64_t check = 0; check < kBudgetChecks; ++check) {
    int64_t candidate = 0;
    for (int64_t K = hi - 1; K > lo; --K) {
      if (fit.at(K) * (1.0 + margin) <= double(budget)) {
        candidate = K;
        break;
      }
    }
    if (candidate == 0) break;
    const int64_t p = peak(candidate);
    if (p > budget && fit.at(candidate) > 0.0) {
      margin = std::max(margin, double(p) / fit.at(candidate) - 1.0) + 0.005;
    }
    bound();
  }
  chosen_T_ = T;
  chosen_K_ = lo;
  budget_ = budget;
  raised_ = raised;
  checked_peak_ = peaks.at(lo);
  signature_ = sig;
}

GradientResult BidirectionalVlrnn::compute_impl(const Workload& workload) {
  const auto& model = checked_model(workload);
  prepare_impl(workload);  // under a budget: a no-op when prepare() saw this workload already
  const int64_t T = workload.batch.time_steps();
  const int64_t K = block_length_for(workload);
  return BidirectionalRun(workload, model, K, backward_direction_sweep((T + K - 1) / K)).run();
}

}  // namespace vlrnn
