#include "vlrnn/core/bidirectional.h"

// Shape legend: T = time, n = steps in a range, B = batch, F / I = a layer's input features,
// Zf / Zb = the directions' outputs, Z = Zf + Zb.

#include "vlrnn/core/layer_stack.h"
#include "vlrnn/core/padding.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace vlrnn {

Bidirectional::Bidirectional(std::vector<Directions> layers, double dropout)
    : layers_(std::move(layers)), dropout_(dropout) {
  TORCH_CHECK(!layers_.empty(), "Bidirectional layers: expected at least one (forward, "
              "backward) pair, got none");
  TORCH_CHECK(dropout >= 0.0 && dropout < 1.0,
              "Bidirectional dropout: expected a probability in [0, 1), got ", dropout);
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& [fwd, bwd] = layers_[l];
    TORCH_CHECK(fwd && bwd, "Bidirectional layers[", l, "]: expected a forward and a backward "
                "module, got ", fwd ? "no backward one" : "no forward one");
    TORCH_CHECK(!as_bidirectional(*fwd) && !as_bidirectional(*bwd), "Bidirectional layers[", l,
                "]: expected left-to-right modules, got a bidirectional one");
    TORCH_CHECK(fwd->input_size() == bwd->input_size(), "Bidirectional layers[", l,
                "]: the forward direction reads ", fwd->input_size(),
                " features per step but the backward one ", bwd->input_size());
    if (l > 0) {
      const int64_t below = layers_[l - 1].first->output_size() + layers_[l - 1].second->output_size();
      TORCH_CHECK(fwd->input_size() == below, "Bidirectional layers[", l, "]: expected input size ",
                  below, " (layer ", l - 1, "'s two directions' outputs), got ", fwd->input_size());
    }
    register_module(fmt::format("fwd_l{}", l), fwd);
    register_module(fmt::format("bwd_l{}", l), bwd);
  }
}

int64_t Bidirectional::input_size() const { return layers_.front().first->input_size(); }

int64_t Bidirectional::output_size() const {
  return layers_.back().first->output_size() + layers_.back().second->output_size();
}

std::vector<StateSpec> Bidirectional::state_spec() const {
  std::vector<StateSpec> specs;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const std::string layer = layers_.size() > 1 ? fmt::format("_l{}", l) : "";
    for (auto spec : layers_[l].first->state_spec()) {
      spec.name += layer + "_fwd";
      specs.push_back(spec);
    }
    for (auto spec : layers_[l].second->state_spec()) {
      spec.name += layer + "_bwd";
      specs.push_back(spec);
    }
  }
  return specs;
}

std::string Bidirectional::describe() const {
  std::string out = fmt::format("Bidirectional(p={}", dropout_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    out += fmt::format("; l{}: fwd {}, bwd {}", l, layers_[l].first->describe(),
                       layers_[l].second->describe());
  }
  return out + ")";
}

std::pair<State, State> Bidirectional::split_state(const State& state, int64_t layer) const {
  size_t offset = 0;
  for (int64_t l = 0; l < layer; ++l) {
    offset += layers_[size_t(l)].first->state_spec().size() +
              layers_[size_t(l)].second->state_spec().size();
  }
  const size_t nf = forward_module(layer).state_spec().size();
  const size_t nb = backward_module(layer).state_spec().size();
  TORCH_CHECK(state.size() >= offset + nf + nb, "Bidirectional state: expected at least ",
              offset + nf + nb, " tensors for layer ", layer, ", got ", state.size());
  const auto& t = state.tensors();
  return {State(std::vector<torch::Tensor>(t.begin() + long(offset), t.begin() + long(offset + nf))),
          State(std::vector<torch::Tensor>(t.begin() + long(offset + nf),
                                           t.begin() + long(offset + nf + nb)))};
}

State Bidirectional::join_states(const std::vector<std::pair<State, State>>& per_layer) const {
  std::vector<torch::Tensor> out;
  for (const auto& [fwd, bwd] : per_layer) {
    out.insert(out.end(), fwd.begin(), fwd.end());
    out.insert(out.end(), bwd.begin(), bwd.end());
  }
  return State(std::move(out));
}

std::pair<torch::Tensor, State> Bidirectional::run_forward_direction(
    int64_t layer, const torch::Tensor& x, const State& entry, const torch::Tensor& lengths,
    const Restarts& restarts) const {
  auto& module = forward_module(layer);
  const auto inputs = module.reads_padding() ? zero_padding(x, lengths) : x;  // [n, B, I]
  return run_with_restarts(
      x.size(0), restarts, module.state_spec(), entry,
      [&](int64_t a, int64_t m, const State& from) {
        const auto piece_lengths = lengths.defined() ? (lengths - a).clamp(0, m) : lengths;
        return module.forward(inputs.narrow(0, a, m), from, piece_lengths);
      });
}

std::pair<torch::Tensor, State> Bidirectional::run_backward_direction(
    int64_t layer, const torch::Tensor& x, const State& entry, const torch::Tensor& lengths,
    const Restarts& restarts) const {
  // NOTE [ The backward direction's steps ]
  auto& module = backward_module(layer);
  const int64_t n = x.size(0);
  if (!lengths.defined() && !restarts.any()) {
    auto [z, exit] = module.forward(x.flip(0), entry, lengths);  // z [n, B, Zb], reversed
    return {z.flip(0), exit};
  }
  const auto valid = lengths.defined() ? lengths.to(torch::kCPU, torch::kLong)
                                       : torch::full({x.size(1)}, n, torch::kLong);  // [B]
  const auto inputs = module.reads_padding() ? zero_padding(x, valid) : x;  // [n, B, I]
  std::set<int64_t> cuts{0, n};
  for (int64_t i = 0; i < valid.size(0); ++i) {
    const int64_t v = valid[i].item<int64_t>();
    if (v > 0 && v < n) cuts.insert(v);
  }
  // NOTE [ Resets ]: a piece also ends where a restart enters its first step run.
  const auto restart_rows = restarts.any() ? restarts.at.any(1) : torch::Tensor();  // [n]
  for (int64_t i = 0; restarts.any() && i < n; ++i) {
    if (restart_rows[i].item<bool>()) cuts.insert(i + 1);
  }
  // Pieces [lo, hi), last to first; in each, a sequence is valid throughout (length >= hi)
  // or not at all.
  std::vector<torch::Tensor> pieces;  // [hi - lo, B, Zb] each, last piece first
  State state = entry;
  for (auto hi = cuts.rbegin(), lo = std::next(cuts.rbegin()); lo != cuts.rend(); ++hi, ++lo) {
    const int64_t m = *hi - *lo;
    if (restarts.any() && restart_rows[*hi - 1].item<bool>()) {
      state = restarted(state, restarts.at[*hi - 1], restarts.initial, module.state_spec());
    }
    auto piece_lengths = torch::where(valid >= *hi, torch::full_like(valid, m),
                                      torch::zeros_like(valid));  // [B]
    auto [z, exit] = module.forward(inputs.narrow(0, *lo, m).flip(0), state, piece_lengths);
    pieces.push_back(z.flip(0));
    state = std::move(exit);
  }
  std::reverse(pieces.begin(), pieces.end());
  return {pieces.size() == 1 ? pieces[0] : torch::cat(pieces, 0), state};
}

torch::Tensor Bidirectional::draw_dropout_masks(int64_t layer, int64_t steps, int64_t batch,
                                                const torch::TensorOptions& options) const {
  if (layer + 1 >= num_layers()) return {};  // nothing above the last layer
  const int64_t z = forward_module(layer).output_size() + backward_module(layer).output_size();
  const auto masks = layer_dropout_masks(is_training(), steps, 2, batch, z, dropout_, options);
  return masks.defined() ? masks.select(1, 0) : masks;  // [T, B, Z]
}

Restarts Bidirectional::restarts(const torch::Tensor& resets, const State& h0, int64_t layer,
                                 bool forward, int64_t t0, int64_t n) const {
  if (!resets.defined()) return {};
  const int64_t steps = resets.size(0);
  auto [h0_f, h0_b] = split_state(h0, layer);
  if (forward) return {resets.narrow(0, t0, n), std::move(h0_f)};
  // Segment ends: the step before each start; the last step of the batch ends none here.
  auto ends = torch::zeros({n, resets.size(1)}, resets.options());  // [n, B]
  const int64_t shifted = std::min(n, steps - t0 - 1);
  if (shifted > 0) ends.narrow(0, 0, shifted).copy_(resets.narrow(0, t0 + 1, shifted));
  return {ends, std::move(h0_b)};
}

std::pair<torch::Tensor, State> Bidirectional::forward(const torch::Tensor& x,
                                                       const State& h_entry,
                                                       const torch::Tensor& lengths) {
  return run(x, h_entry, lengths, {});
}

std::pair<torch::Tensor, State> Bidirectional::run(const torch::Tensor& x, const State& h_entry,
                                                   const torch::Tensor& lengths,
                                                   const torch::Tensor& resets) const {
  // x [T, B, F] -> per layer: [T, B, I] -> (zf [T, B, Zf], zb [T, B, Zb]) -> [T, B, Z]
  const int64_t steps = x.size(0), batch = x.size(1);
  std::vector<std::pair<State, State>> exits;
  torch::Tensor input = x;
  for (int64_t l = 0; l < num_layers(); ++l) {
    auto [entry_f, entry_b] = split_state(h_entry, l);
    auto [zf, exit_f] = run_forward_direction(l, input, entry_f, lengths,
                                              restarts(resets, h_entry, l, true, 0, steps));
    auto [zb, exit_b] = run_backward_direction(l, input, entry_b, lengths,
                                               restarts(resets, h_entry, l, false, 0, steps));
    input = torch::cat({zf, zb}, -1);  // [T, B, Z]
    const auto masks = draw_dropout_masks(l, steps, batch, input.options());
    if (masks.defined()) input = input * masks;
    exits.emplace_back(std::move(exit_f), std::move(exit_b));
  }
  return {input, join_states(exits)};
}

bool is_bidirectional_kind(const std::string& kind) {
  return kind == "bilstm" || kind == "bigru" || kind.rfind(kBidirectionalPrefix, 0) == 0;
}

const Bidirectional* as_bidirectional(const RecurrentModule& model) {
  return dynamic_cast<const Bidirectional*>(&model);
}

}  // namespace vlrnn
