#pragma once
// Which built-in names are bidirectional models (vlrnn/core/bidirectional.h) and which
// methods take them, so that verify, compare and the tests pair each model with the
// methods that can run it.

#include "vlrnn/core/bidirectional.h"  // kBidirectionalPrefix, is_bidirectional_kind

#include <string>

namespace vlrnn {

// Whether the method `name` computes gradients for a bidirectional model: full, checkpoint,
// bivlrnn and the planner (which runs bivlrnn on one); the others cut the sequence into
// blocks and refuse one.
bool handles_bidirectional(const std::string& name);
// Whether it computes them for a left-to-right model: every method but bivlrnn.
bool handles_left_to_right(const std::string& name);
// Whether the method `name` computes gradients for a model of kind `kind`: one of the two
// above, as the kind is bidirectional (is_bidirectional_kind) or not.
bool method_takes_model(const std::string& name, const std::string& kind);
// Throws naming `method` and `kind`, and the methods that take such a model, unless
// method_takes_model(method's name, kind); `method` is a spec ("vlrnn:block_length=8", or a
// sweep's template "vlrnn:block_length={K}").
void check_method_takes_model(const std::string& method, const std::string& kind);

}  // namespace vlrnn
