#pragma once
// A bidirectional recurrent model: L layers, each two independent RecurrentModules, one run
// over t = 0 .. T-1 and one over each sequence's valid steps in reverse, starting at its own
// last valid step (as LibTorch's packed `bidirectional=true` modules do). Layer l's output at
// t is [forward z_t, backward z_t] (what LibTorch's bidirectional modules return); layer l + 1
// reads it, with dropout between layers.
// Shapes: T = time, B = batch, F = input features, Zf / Zb = the directions' outputs,
// Z = Zf + Zb, L = layers.
//
// NOTE [ A bidirectional model is not left to right ]
// The output at t depends on every step, so no block can run on its own from an entry state:
// a Bidirectional is a RecurrentModule only so that a Workload can hold it, and its forward()
// takes whole sequences only. The block primitives (run_model, vlrnn/methods/block.h) refuse
// part of one, so a method that cuts blocks stops with a clear error. Full BPTT, checkpointing
// (vlrnn/baselines/checkpoint_bidirectional.h) and the bidirectional block method
// (vlrnn/schedule/bidirectional_vlrnn.h) see the two directions through this class.
//
// The state is each layer's forward direction's state tensors followed by its backward
// direction's, layer after layer: (fwd_0..., bwd_0..., fwd_1..., bwd_1..., ...). In h0 the
// backward part is the state each sequence's backward direction starts from at its last
// valid step; in the final state it is the state after step 0.
//
// NOTE [ The backward direction's steps ]
// The backward direction runs a range [t0, t0 + n) from t0 + n - 1 down to t0, for every
// sequence at once, each joining at its own last valid step (before it, its state is h0's).
// So its random draws belong to the step t they are made at, whatever the lengths, and a
// range run in pieces (blocks, last to first) draws what one run over it draws. A
// RecurrentModule takes lengths as a valid prefix of its block, but reversed, a sequence that
// ends inside the range has a valid suffix. So the range is cut at every length that ends
// inside it, and each piece, reversed, has every sequence wholly valid or wholly past its end.
//
// Dropout between layers (p > 0, L > 1): one [B, Z] mask per step, drawn after the layer
// below ran (NOTE [ Dropout masks drawn per step ] in layer_stack.h).

#include "vlrnn/core/recurrent_module.h"
#include "vlrnn/core/resets.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vlrnn {

class Bidirectional : public RecurrentModule {
 public:
  using Directions = std::pair<std::shared_ptr<RecurrentModule>, std::shared_ptr<RecurrentModule>>;
  // One (forward, backward) pair per layer; layer l + 1's directions read layer l's Z.
  explicit Bidirectional(std::vector<Directions> layers, double dropout = 0.0);

  // The whole sequence only (NOTE [ A bidirectional model is not left to right ]):
  // x [T, B, F], h_entry as state_spec(), lengths [B] (or undefined: all T) -> z [T, B, Z].
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  // forward() with resets [T, B] (undefined: none), from h_entry as the initial state
  // (NOTE [ Resets ] in core/sequence.h; restarts()).
  std::pair<torch::Tensor, State> run(const torch::Tensor& x, const State& h_entry,
                                      const torch::Tensor& lengths,
                                      const torch::Tensor& resets) const;
  int64_t input_size() const override;
  int64_t output_size() const override;
  std::vector<StateSpec> state_spec() const override;
  bool reads_padding() const override { return false; }  // it selects the padding away
  std::string describe() const override;

  int64_t num_layers() const { return int64_t(layers_.size()); }
  double dropout() const { return dropout_; }
  RecurrentModule& forward_module(int64_t layer) const { return *layers_.at(size_t(layer)).first; }
  RecurrentModule& backward_module(int64_t layer) const { return *layers_.at(size_t(layer)).second; }

  // Layer l's (forward, backward) parts of a whole-model state, and back.
  std::pair<State, State> split_state(const State& state, int64_t layer) const;
  State join_states(const std::vector<std::pair<State, State>>& per_layer) const;

  // Layer l's forward direction on a range of steps, in time order from `entry`:
  // x [n, B, I], lengths [B] valid steps in the range (undefined: all n) -> (z [n, B, Zf], exit).
  std::pair<torch::Tensor, State> run_forward_direction(int64_t layer, const torch::Tensor& x,
                                                        const State& entry,
                                                        const torch::Tensor& lengths,
                                                        const Restarts& restarts = {}) const;
  // Layer l's backward direction on a range, from its last step down to its first
  // (NOTE [ The backward direction's steps ]): `entry` is the state before step n - 1 is
  // run, the exit the state after step 0; z [n, B, Zb] is returned in time order.
  std::pair<torch::Tensor, State> run_backward_direction(int64_t layer, const torch::Tensor& x,
                                                         const State& entry,
                                                         const torch::Tensor& lengths,
                                                         const Restarts& restarts = {}) const;
  // Where layer l's direction restarts in the range [t0, t0 + n) of a batch with `resets`
  // [T, B] (undefined: none), from its part of the model's initial state `h0` (NOTE
  // [ Resets ]): the forward direction entering step t where a segment starts at t, the
  // backward one entering step t (from t + 1) where a segment ends at t, i.e. the next one
  // starts at t + 1. Indexed in time order, as both runners take it.
  Restarts restarts(const torch::Tensor& resets, const State& h0, int64_t layer, bool forward,
                    int64_t t0, int64_t n) const;
  // The masks between layer l and l + 1 for T steps ([T, B, Z], scaled), or undefined when
  // none are drawn (eval mode, p = 0, or the top layer).
  torch::Tensor draw_dropout_masks(int64_t layer, int64_t steps, int64_t batch,
                                   const torch::TensorOptions& options) const;

 private:
  std::vector<Directions> layers_;
  double dropout_;
};

// True when `model` is a Bidirectional (NOTE [ A bidirectional model is not left to right ]).
const Bidirectional* as_bidirectional(const RecurrentModule& model);

// The model kind "bi:<kind>": one bidirectional layer whose two directions are `kind` models,
// e.g. "bi:gru_v3", or "bi:lstm" with L = 2 and dropout (the registry's make_model builds
// it; each direction is itself an L-layer `kind` model).
constexpr const char* kBidirectionalPrefix = "bi:";

// True for the names of bidirectional model kinds: bilstm, bigru and "bi:<kind>".
bool is_bidirectional_kind(const std::string& kind);

}  // namespace vlrnn
