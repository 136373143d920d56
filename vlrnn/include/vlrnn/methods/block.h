#pragma once
// Primitives over a chain of steps that every gradient method is built from: run a range of
// steps with or without autograd, and back-propagate a block from its two roots.
// Shapes: the batch's [T, B, ...]; a block covers steps [t0, t0 + n).

#include "vlrnn/methods/gradient_method.h"

namespace vlrnn {

// ceil(sqrt(T)), at least 1: the default block length and segment count of every method
// that cuts the sequence (the split that balances stored states against one block's steps).
int64_t sqrt_steps(int64_t time_steps);

// NOTE [ A block that fits the cache ]: on the CPU, VLRNN's default block is cut short enough
// that one block's states (K steps of the batch's state) fit the L2 cache. A block is then
// recomputed and back-propagated while its activations are still near the core, which full
// BPTT, reading a whole sequence's tape back from memory, cannot do: measured, the fitting K
// beat full BPTT where K = sqrt(T) did not (docs/methods.md, "The default block length").
// K stays within [ceil(sqrt(T) / 4), ceil(sqrt(T))], so memory stays O(sqrt(T)): at most
// 4 sqrt(T) stored states, each smaller than a step's tape. An unknown cache size, or a batch
// off the CPU, keeps ceil(sqrt(T)).
//
// The pure rule: `state_bytes_per_step` is one step's state for the whole batch, `cache_bytes`
// the L2's size (0 = unknown).
int64_t cache_fitting_block_length(int64_t time_steps, int64_t state_bytes_per_step,
                                   int64_t cache_bytes);
// This machine's L2 cache in bytes, per core; 0 when the system does not say.
int64_t l2_cache_bytes();
// The rule for this workload: its model's state for the batch, on this machine's L2.
int64_t default_block_length(const Workload& workload);

// A block run with autograd recording: the weighted loss (a scalar with its graph), the
// unweighted per-step losses [n, B] (detached) and the exit state (with its graph).
struct BlockForward {
  torch::Tensor loss;
  torch::Tensor step_losses;
  State exit;
};

// The head's share of the loss for steps [t0, t0 + n) given the model's outputs z [n, B, Z]:
// the weighted loss (with its graph) and the unweighted per-step losses [n, B] (detached).
struct HeadLoss {
  torch::Tensor loss;
  torch::Tensor step_losses;
};
HeadLoss head_loss(const Workload& workload, const torch::Tensor& z, int64_t t0, int64_t n);

// The model on steps [t0, t0 + n) from `entry`: (z [n, B, Z], exit state). Every method
// calls the model through here. NOTE [ Padding never reaches the model ]: inputs past a
// sequence's end may hold anything (NaN included, as verify pads them); a model that honours
// lengths by masking its outputs would still multiply NaN by a weight, and NaN · 0 = NaN in
// the weight gradient. So the padded steps of `inputs` [n, B, F] are replaced by zeros
// (a select, whose backward sends them no gradient) before the model sees them. A model
// that never reads them (RecurrentModule::reads_padding() false) gets `inputs` as they are:
// the zero-filled copy costs [n, B, F], and a view of it saved by any step keeps all of it
// alive for as long as the tape. A batch with resets runs in pieces cut where a sequence
// restarts, the state restarted there (NOTE [ Resets ] in core/sequence.h).
std::pair<torch::Tensor, State> run_model(const Workload& workload, const torch::Tensor& inputs,
                                          int64_t t0, int64_t n, const State& entry);

// Runs the model and head on steps [t0, t0 + n) from `entry`, recording autograd.
// `inputs` are the batch's inputs for the block (the caller picks whether they are a view
// of the batch or a detached leaf).
BlockForward forward_block(const Workload& workload, const torch::Tensor& inputs, int64_t t0,
                           int64_t n, const State& entry);

// Runs the model only (no head, no autograd) on steps [t0, t0 + n): returns the exit state,
// compacted to be stored (NOTE [ Stored states are compact ], core/state.h).
State forward_no_grad(const Workload& workload, int64_t t0, int64_t n, const State& entry);

// Back-propagates a block from both of its roots at once: its loss (seed 1) and its exit
// state, seeded with `exit_grad` (the δh flowing back from the next block; empty for the
// last block). One backward call, no retain_graph.
void backward_block(const BlockForward& block, const State& exit_grad);

// Accumulates dL/dx of a whole sequence into the inputs once all blocks are done: into
// .grad() of a leaf, or through the graph that produced a non-leaf.
void accumulate_input_grad(const torch::Tensor& inputs, const torch::Tensor& input_grad);

}  // namespace vlrnn
