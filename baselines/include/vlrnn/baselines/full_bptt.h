#pragma once
// Full backpropagation through time: one forward over all T steps with autograd recording,
// one backward. The reference every exact method is verified against; memory grows with T·B.

#include "vlrnn/methods/gradient_method.h"

namespace vlrnn {

class FullBptt : public GradientMethod {
 public:
  std::string name() const override { return "full"; }

 protected:
  GradientResult compute_impl(const Workload& workload) override;
};

}  // namespace vlrnn
