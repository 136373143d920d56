#pragma once
// Exact BPTT in blocks of K steps for a bidirectional model (vlrnn/core/bidirectional.h)
// with a per-step head, in memory that does not grow with T's activations.
//
// NOTE [ Bidirectional blocks ]
// At step t the head reads [forward z_t, backward z_t], and the two directions run in
// opposite orders, so neither direction's blocks can be back-propagated in one sweep with
// the other's outputs at hand. For the top layer (the one the head reads):
// 1. No-grad pass of the forward direction over blocks first to last: its state and the
//    generators at every block boundary are stored.
// 2. Sweep over the blocks last to first: the backward direction runs block i without
//    grad from its carried state (that is its own no-grad pass, in its own order: it
//    stores its state and generators at each boundary as it goes), giving zb; the forward
//    direction reruns block i with grad from its stored entry; the head reads [zf, zb]; one
//    backward from the block's loss and its exit state (seeded with δh from block i + 1)
//    gives dθ of the forward direction and of the head, and δh at the block's entry.
// 3. Sweep over the blocks first to last: the forward direction reruns block i without
//    grad (zf); the backward direction reruns it with grad from its stored entry; the head
//    reads [zf, zb] once more, but only dL/dzb is taken from it (autograd::grad on a leaf
//    standing for zb), so the head's parameter gradient is counted once, in sweep 2; one
//    backward from zb (seeded dL/dzb) and the block's exit (δh from block i - 1).
// Both directions' random draws replay exactly: each block restores the generators stored
// at its entry (NOTE [ RNG across the no-grad pass ] in vlrnn/core/rng.h), and the draws
// happen in the order of one whole forward pass: the forward direction's first, then the
// backward direction's (NOTE [ The backward direction's steps ]).
// Cost, per direction of the top layer: the forward direction runs three times (no-grad
// pass, sweep 2 with grad, sweep 3 without) and the backward direction twice (sweep 2
// without, sweep 3 with grad): 2.5 forward passes of the layer where full BPTT runs 1, so
// 1.5 extra forward passes (VLRNN's one-directional method: 1); the head runs twice.
// Memory: K steps of one direction's activations + zb or zf of one block + 2 stored states
// (and generator snapshots) per block; nothing that grows with T but those states.
//
// Stacked layers (L > 1): layer l + 1 reads layer l's whole output sequence, so the no-grad
// pass runs the lower layers whole, layer by layer, in blocks, and stores each layer's
// output sequence (after its dropout, and the dropout mask when there is dropout) as the
// next layer's input: L - 1 tensors of [T, B, Z], 2 (L - 1) with dropout; and while the
// layers are back-propagated, top to bottom, the gradient of the layer above's input and
// of this one's: one [T, B, Z] for L = 2, two for L >= 3. Measured (bilstm, H = 64, B = 8,
// K = 64, float32, no dropout: `vlrnn compare`, docs/methods.md): 4.41 / 35.5 MiB at
// T = 256 / 4096 for L = 2, 6.65 / 68.2 MiB for L = 3, where these tensors make 32 and
// 64 MiB at T = 4096 (one layer: 1.94 / 2.52 MiB). The top layer
// runs the three steps above and accumulates dL/d(its input); a lower layer gets
// dL/d(its output) whole, so each of its directions is back-propagated in one sweep of its
// own (forward: last to first, backward: first to last) from that gradient, with no
// recomputation of the other direction. Cost: lower layers run each direction twice (one
// no-grad pass, one with grad). Memory therefore grows with T for L > 1 (the stored
// sequences), as any exact method that does not recompute lower layers must.

#include "vlrnn/schedule/vlrnn_method.h"

namespace vlrnn {

// NOTE [ Choosing K under a budget ]
// Every K costs the same forward passes (above), so a larger K is faster: fewer blocks,
// fewer calls, fewer stored states to make and free. Memory is not monotone in K: K steps
// of activations grow with K, the 2 stored states per block with N = ceil(T / K). So under
// a budget the fastest K is the largest whose measured iteration peak fits. prepare() finds it
// from measurements on the workload itself (run as measure_iteration runs a step, side
// effects undone):
// 1. three probes, K0 / 2, K0 and 2 K0 around K0 = ceil(sqrt(T)) (near the smallest
//    peak), fit peak(K) = f + a K + c N(K);
// 2. the largest K above the largest that fitted and below the smallest that did not,
//    whose predicted peak, raised by the margin the predictions have missed by so far,
//    fits the budget, is measured: kept as the new largest fitting K when it fits, else it
//    bounds the search from above and its miss raises the margin; at most kBudgetChecks
//    such checks, and K never rises past one measured over the budget;
// 3. when no probe fits, the fitted minimum's K is measured, then, while nothing fits, the
//    unmeasured neighbours of the least peak measured, down to a local minimum of the
//    measured peaks (at most kBudgetChecks more): the peaks need not follow the smooth fit.
//    PyTorch 2.x's oneDNN LSTM rounds its workspace up to whole pages, so a bilstm's peak is
//    a staircase in K (two layers, F = 3, H = 16, B = 4, T = 60: the fit's minimum K = 2
//    measured 254196 bytes, K = 3 240388). If none fits, a budget in bytes is refused
//    naming the smallest peak measured, and a percentage is raised to it (as the planner
//    raises one).
// The chosen K was measured under the budget, so the budget holds however far the fit was
// off; a poor fit costs speed (a smaller K), never the budget.

// The block length's options are VLRNN's: block_length (K) or num_blocks (N), default
// K = ceil(sqrt(T)); or a budget, and then K is chosen per workload by prepare()
// (NOTE [ Choosing K under a budget ]).
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
  // The block length used for a sequence of `time_steps` steps: under a budget, the one
  // prepare() chose (it must have prepared a workload of that length).
  int64_t block_length_for(int64_t time_steps) const;

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
