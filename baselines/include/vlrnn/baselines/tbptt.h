#pragma once
// Truncated BPTT, Williams & Peng's TBPTT(k1, k2): the forward pass advances k1 steps at a
// time; after each chunk of k1 steps, the losses of that chunk are back-propagated through
// the last k2 steps (k1 <= k2) and the state beyond that window is treated as a constant.
// Precisely: each chunk [c0, c0 + k1) is back-propagated through itself and the k2 - k1
// steps before it (a short last chunk included), so TBPTT(k) with k1 = k2 = k is the usual
// detach-every-k-steps loop, and the result equals full BPTT when the last chunk's window
// reaches step 0 (e.g. k1 = k2 >= T).
// Parameter gradients accumulate over all chunks (one optimizer step per sequence, as in
// the other methods). Approximate by design.
//
// Each window is recomputed from the stored state at the chunk boundary before it, with the
// generators restored there, so every step sees the same dropout masks as in one forward
// pass (and as in the exact methods).

#include "vlrnn/methods/gradient_method.h"

namespace vlrnn {

struct TbpttOptions {
  // k1: steps between backward passes; k2: steps each backward pass reaches back.
  // 0 = ceil(sqrt(T)) for both; a k1 of 0 with k2 given means k1 = k2.
  int64_t k1 = 0;
  int64_t k2 = 0;

  TbpttOptions& with_k(int64_t k) { k1 = k2 = k; return *this; }
  TbpttOptions& with_k1(int64_t k) { k1 = k; return *this; }
  TbpttOptions& with_k2(int64_t k) { k2 = k; return *this; }
};

class TbpttMethod : public GradientMethod {
 public:
  explicit TbpttMethod(TbpttOptions options = {});
  std::string name() const override { return "tbptt"; }
  std::string describe() const override;
  bool is_exact() const override { return false; }
  // (k1, k2) used for a sequence of `time_steps` steps.
  std::pair<int64_t, int64_t> windows_for(int64_t time_steps) const;

 protected:
  GradientResult compute_impl(const Workload& workload) override;

 private:
  TbpttOptions options_;
};

}  // namespace vlrnn
