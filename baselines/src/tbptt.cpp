#include "vlrnn/baselines/tbptt.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"

#include <cmath>
#include <map>

namespace vlrnn {

TbpttMethod::TbpttMethod(TbpttOptions options) : options_(options) {
  TORCH_CHECK(options.k1 >= 0, "tbptt k1: expected a positive number of steps, got ", options.k1);
  TORCH_CHECK(options.k2 >= 0, "tbptt k2: expected a positive number of steps, got ", options.k2);
  TORCH_CHECK(options.k1 == 0 || options.k2 == 0 || options.k1 <= options.k2,
              "tbptt: expected k1 <= k2 (each backward pass reaches at least as far back as the "
              "chunk it covers), got k1 = ", options.k1, ", k2 = ", options.k2);
}

std::pair<int64_t, int64_t> TbpttMethod::windows_for(int64_t time_steps) const {
  const int64_t fallback = sqrt_steps(time_steps);
  int64_t k2 = options_.k2 > 0 ? options_.k2 : (options_.k1 > 0 ? options_.k1 : fallback);
  int64_t k1 = options_.k1 > 0 ? options_.k1 : k2;
  return {k1, k2};
}

std::string TbpttMethod::describe() const {
  if (options_.k1 == 0 && options_.k2 == 0) return "tbptt(k=sqrt(T))";
  const auto [k1, k2] = windows_for(1);
  if (k1 == k2) return "tbptt(k=" + std::to_string(k1) + ")";
  return "tbptt(k1=" + std::to_string(k1) + ",k2=" + std::to_string(k2) + ")";
}

GradientResult TbpttMethod::compute_impl(const Workload& workload) {
  const auto& inputs = workload.batch.inputs;  // [T, B, F]
  const auto device = inputs.device();
  const int64_t steps = workload.batch.time_steps();
  const auto [k1, k2] = windows_for(steps);

  GradientResult result;
  result.step_losses = torch::zeros({steps, workload.batch.batch_size()},
                                    inputs.options().requires_grad(false));
  auto loss = torch::zeros({}, inputs.options().requires_grad(false));
  // At every chunk boundary c (0, k1, 2k1, ...): the state there (detached, except h0) and
  // the generators as one forward pass has them there.
  std::map<int64_t, State> boundary_state{{0, workload.h0}};
  std::map<int64_t, RngState> boundary_rng{{0, RngState::capture(device)}};

  for (int64_t c0 = 0; c0 < steps; c0 += k1) {
    const int64_t t = std::min(c0 + k1, steps);
    // The window is [s, t), reaching k2 steps back from the chunk's nominal end c0 + k1 (so a
    // short last chunk is treated like the others, and TBPTT(k) never overlaps chunks).
    const int64_t s = std::max<int64_t>(0, c0 + k1 - k2);
    auto forward_stream = RngState::capture(device);

    // The window's part before this chunk, [s, c0): from the boundary b <= s, without grad up
    // to s, then with grad, replaying each boundary's generator state.
    int64_t b = (s / k1) * k1;
    boundary_rng.at(b).restore();
    State state = boundary_state.at(b);
    if (s > b) {
      state = forward_no_grad(workload, b, s - b, state);
      result.counters.forward_no_grad += s - b;
    }
    if (s > 0) state = state.detached();  // the truncation: no gradient flows beyond s
    for (int64_t from = s; from < c0;) {
      const int64_t to = std::min(c0, (from / k1 + 1) * k1);
      if (from % k1 == 0) boundary_rng.at(from).restore();
      state = run_model(workload, inputs.narrow(0, from, to - from), from, to - from, state).second;
      result.counters.forward_with_grad += to - from;
      from = to;
    }

    // The chunk itself, [c0, t), drawing from the forward stream: its own losses.
    forward_stream.restore();
    const BlockForward chunk = forward_block(workload, inputs.narrow(0, c0, t - c0), c0, t - c0,
                                             state);
    result.counters.forward_with_grad += t - c0;
    loss += chunk.loss.detach();
    result.step_losses.narrow(0, c0, t - c0).copy_(chunk.step_losses);
    boundary_state[t] = chunk.exit.detached();
    boundary_rng[t] = RngState::capture(device);
    // The caller's seed at T joins the last window only (NOTE [ Gradients across calls ]).
    backward_block(chunk, t == steps ? workload.final_state_grad : State());
    result.counters.backward += t - s;

    // Boundaries no later window can start from are dropped: memory stays O(k2 / k1) states.
    const int64_t oldest_needed = ((std::max<int64_t>(0, c0 + 2 * k1 - k2)) / k1) * k1;
    while (boundary_state.size() > 1 && boundary_state.begin()->first < oldest_needed) {
      boundary_state.erase(boundary_state.begin());
      boundary_rng.erase(boundary_rng.begin());
    }
  }
  boundary_rng.rbegin()->second.restore();  // where one forward pass leaves the generators
  result.final_state = boundary_state.rbegin()->second;
  result.loss = loss;
  return result;
}

}  // namespace vlrnn
