#include "vlrnn/core/sequence.h"

namespace vlrnn {

SequenceBatch SequenceBatch::slice(int64_t t0, int64_t n) const {
  SequenceBatch block;
  block.inputs = inputs.narrow(0, t0, n);    // [n, B, F]
  block.targets = targets.narrow(0, t0, n);  // [n, B(, O)]
  if (lengths.defined()) {
    block.lengths = (lengths - t0).clamp(0, n);  // [B]
  }
  return block;
}

}  // namespace vlrnn
