#pragma once
// Checkpointing a bidirectional model (vlrnn/core/bidirectional.h) as a user of
// torch.utils.checkpoint would: each direction of each layer cut into segments of
// `segment_length` steps (the forward direction's first to last, the backward direction's
// last to first), each run through checkpoint(); the head reads [zf, zb] outside them.
//
// NOTE [ Checkpointing both directions ]: the head at t needs both directions' outputs, so
// it cannot run inside a segment: every layer's output sequence z [T, B, Z] is kept for the
// backward pass (as with CheckpointOptions::head_inside = false), with the head's
// activations for all T steps; only the directions' step activations are recomputed.
// Memory therefore grows with T; the block method that does not is bivlrnn
// (vlrnn/schedule/bidirectional_vlrnn.h).

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/methods/gradient_method.h"

namespace vlrnn {

GradientResult checkpoint_bidirectional(const Workload& workload, const Bidirectional& model,
                                        int64_t segment_length);

}  // namespace vlrnn
