#include "vlrnn/core/resets.h"

namespace vlrnn {

State restarted(const State& state, const torch::Tensor& rows, const State& initial,
                const std::vector<StateSpec>& specs) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < state.size(); ++i) {
    std::vector<int64_t> shape(size_t(state[i].dim()), 1);
    shape[size_t(specs[i].batch_dim)] = rows.size(0);
    out.push_back(torch::where(rows.to(state[i].device()).view(shape), initial[i], state[i]));
  }
  return State(std::move(out));
}

std::pair<torch::Tensor, State> run_with_restarts(int64_t n, const Restarts& restarts,
                                                  const std::vector<StateSpec>& specs,
                                                  const State& entry, const StretchRunner& run) {
  if (!restarts.any()) return run(0, n, entry);
  const auto rows = restarts.at.any(1);  // [n] some sequence restarts entering the step
  std::vector<int64_t> starts{0};
  for (int64_t i = 1; i < n; ++i) {
    if (rows[i].item<bool>()) starts.push_back(i);
  }
  starts.push_back(n);
  std::vector<torch::Tensor> outputs;
  State state = entry;
  for (size_t p = 0; p + 1 < starts.size(); ++p) {
    const int64_t a = starts[p];
    if (rows[a].item<bool>()) state = restarted(state, restarts.at[a], restarts.initial, specs);
    auto [z, exit] = run(a, starts[p + 1] - a, state);
    outputs.push_back(std::move(z));
    state = std::move(exit);
  }
  return {outputs.size() == 1 ? outputs[0] : torch::cat(outputs), state};
}

}  // namespace vlrnn
