#pragma once
// The verifier for a user's own model: one call that takes the model, head and batch plus a
// list of method specs, and returns the rows `vlrnn verify` prints (print_table() in
// report.h prints them).

#include "vlrnn/verify/case.h"

#include <string>
#include <vector>

namespace vlrnn::verify {

struct VerifyModelOptions {
  State h0 = {};                          // empty: zeros that require no grad
  Reduction reduction = Reduction::kMean;
  uint64_t seed = 1234;                   // the generator state both runs start from
  std::string label = "model";            // the rows' case name
};

// Each method of `specs` (e.g. {"vlrnn:block_length=16", "checkpoint"}) against full BPTT on the
// same weights, data and generator state: loss, per-step losses, every gradient (parameters,
// h0 and inputs when they require grad) and the final state. A method that throws gives an
// error row; nothing here throws for a failing method.
std::vector<VerifyOutcome> verify_model(RecurrentModule& model, OutputModule& head,
                                        const SequenceBatch& batch,
                                        const std::vector<std::string>& specs,
                                        const VerifyModelOptions& options = {});

}  // namespace vlrnn::verify
