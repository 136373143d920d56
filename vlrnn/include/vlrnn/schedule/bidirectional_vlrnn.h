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
// output sequence (after its dropout, and the dropout mask) as the next layer's input:
// 2 · (L - 1) tensors of [T, B, Z] (about 2 · (L - 1) · T · B · Z · element bytes), plus one
// [T, B, Z] gradient while the layers are back-propagated, top to bottom. The top layer
// runs the three steps above and accumulates dL/d(its input); a lower layer gets
// dL/d(its output) whole, so each of its directions is back-propagated in one sweep of its
// own (forward: last to first, backward: first to last) from that gradient, with no
// recomputation of the other direction. Cost: lower layers run each direction twice (one
// no-grad pass, one with grad). Memory therefore grows with T for L > 1 (the stored
// sequences), as any exact method that does not recompute lower layers must.

#include "vlrnn/schedule/vlrnn_method.h"

namespace vlrnn {

// The block length's options are VLRNN's: block_length (K) or num_blocks (N), default
// K = ceil(sqrt(T)).
using BidirectionalVlrnnOptions = VlrnnOptions;

class BidirectionalVlrnn : public GradientMethod {
 public:
  explicit BidirectionalVlrnn(BidirectionalVlrnnOptions options = {});
  std::string name() const override { return "bivlrnn"; }
  std::string describe() const override;
  // The block length used for a sequence of `time_steps` steps.
  int64_t block_length_for(int64_t time_steps) const;

 protected:
  GradientResult compute_impl(const Workload& workload) override;
  // The order in which the backward directions' with-grad sweep visits blocks 0 .. N-1:
  // first to last (each block's exit δh comes from the block before it). A seam for the
  // mutation tests, which reverse it and expect the verifier to fail.
  virtual std::vector<int64_t> backward_direction_sweep(int64_t num_blocks) const;

 private:
  BidirectionalVlrnnOptions options_;
  VlrnnMethod blocks_;  // checks the options and derives K from them
};

}  // namespace vlrnn
