#pragma once
// Exact BPTT in blocks of K steps for a bidirectional model (vlrnn/core/bidirectional.h)
// with a per-step head, in memory that does not grow with T's activations.
//
// NOTE [ Bidirectional blocks ]
// At step t the head reads [forward z_t, backward z_t], and the two directions run in
// opposite orders, so no one sweep over the blocks has both outputs at hand. The top layer
// runs three passes (in full in docs/methods.md, "Bidirectional models"):
// 1. forward direction without grad, first block to last: store its state and generators;
// 2. last block to first: backward direction without grad, forward direction with grad;
//    one backward gives the forward direction's and the head's gradients;
// 3. first block to last: forward without grad, backward with grad; the head runs again, but
//    only dL/dzb is taken from it, so the head's gradient is counted once.
// Each block restores the generators stored at its entry and draws in one whole pass's order
// (NOTE [ RNG across the no-grad pass ] in vlrnn/core/rng.h, NOTE [ The backward direction's
// steps ]). Lower layers (L > 1) are stored whole, so a stack's memory grows with T.

#include "vlrnn/schedule/vlrnn_method.h"

namespace vlrnn {

// NOTE [ Choosing K under a budget ]
// Every K costs the same forward passes, so the largest K whose iteration peak fits is the
// fastest. Memory is not monotone in K (K steps of activations, 2 states per block), and the
// measured peaks need not follow a smooth fit (a oneDNN LSTM's peak is a staircase in K). So
// prepare() measures on the workload itself: three probes around sqrt(T) fit peak(K) = f +
// a K + c ceil(T / K); then at most kBudgetChecks measured checks of the largest K predicted
// to fit, with the fit's misses so far as margin, never above a K measured over the budget;
// when no probe fits, it walks the measured peaks down to a local minimum. A budget in bytes
// that no K fits is refused; a percentage is raised to the smallest peak measured.
// The chosen K was measured under the budget: a poor fit costs speed, never the budget.

// The block length's options are VLRNN's: block_length (K) or num_blocks (N), default
// VLRNN's (NOTE [ A block that fits the cache ] in methods/block.h); or a budget, and then K
// is chosen per workload by prepare() (NOTE [ Choosing K under a budget ]).
struct BidirectionalVlrnnOptions {
  int64_t block_length = 0;  // K; 0 = from num_blocks, or the budget
  int64_t num_blocks = 0;    // N (K = ceil(T / N)); 0 = default or the budget
  // A cap on the measured iteration peak (bytes above parameters and data); 0 = none.
  int64_t budget_bytes = 0;
  // The cap as a percentage of full BPTT's measured iteration peak on the workload (used
  // when budget_bytes is 0; 0 = none), raised to the smallest peak measured when below it.
  double budget_percent = 0.0;

  BidirectionalVlrnnOptions& with_block_length(int64_t k) { block_length = k; return *this; }
  BidirectionalVlrnnOptions& with_num_blocks(int64_t n) { num_blocks = n; return *this; }
  BidirectionalVlrnnOptions& with_budget_bytes(int64_t b) { budget_bytes = b; return *this; }
  BidirectionalVlrnnOptions& with_budget_percent(double p) { budget_percent = p; return *this; }
  bool budgeted() const { return budget_bytes > 0 || budget_percent > 0.0; }
};

// Measured checks of a predicted K per prepare() (NOTE [ Choosing K under a budget ]).
constexpr int64_t kBudgetChecks = 6;

class BidirectionalVlrnn : public GradientMethod {
 public:
  explicit BidirectionalVlrnn(BidirectionalVlrnnOptions options = {});
  std::string name() const override { return "bivlrnn"; }
  std::string describe() const override;
  // The block length used on `workload`: under a budget, the one prepare() chose (it must
  // have prepared a workload of that length).
  int64_t block_length_for(const Workload& workload) const;

  // Under a budget, after prepare(): the budget in bytes the choice was checked against (a
  // percentage's, raised when needed) and the chosen K's measured iteration peak.
  int64_t checked_budget_bytes() const { return budget_; }
  int64_t checked_peak_bytes() const { return checked_peak_; }

 protected:
  // Under a budget: chooses K for the workload (NOTE [ Choosing K under a budget ]), once
  // per workload signature. Otherwise nothing.
  void prepare_impl(const Workload& workload) override;
  GradientResult compute_impl(const Workload& workload) override;
  // The order in which the backward directions' with-grad sweep visits blocks 0 .. N-1:
  // first to last (each block's exit δh comes from the block before it). A seam for the
  // mutation tests, which reverse it and expect the verifier to fail.
  virtual std::vector<int64_t> backward_direction_sweep(int64_t num_blocks) const;

 private:
  BidirectionalVlrnnOptions options_;
  VlrnnMethod blocks_;  // checks the options and derives K from them
  // Under a budget: the workload prepare() chose for, its T, K, budget and measured peak.
  std::string signature_;
  int64_t chosen_T_ = 0, chosen_K_ = 0, budget_ = 0, checked_peak_ = 0;
  bool raised_ = false;  // a percentage's budget raised to the smallest peak measured
};

}  // namespace vlrnn
