#pragma once
// Which built-in names are bidirectional models (vlrnn/core/bidirectional.h) and which
// methods take them, so that verify, compare and the tests pair each model with the
// methods that can run it.

#include <string>

namespace vlrnn {

// "bi:<kind>": one bidirectional layer whose two directions are `kind` models, e.g.
// "bi:gru_v3", or "bi:lstm" with L = 2 and dropout (make_model builds it).
constexpr const char* kBidirectionalPrefix = "bi:";

// True for the bidirectional kinds: bilstm, bigru and "bi:<kind>".
bool is_bidirectional_kind(const std::string& kind);

// Whether the method `name` computes gradients for a bidirectional model: full, checkpoint
// and bivlrnn; the others cut the sequence into blocks and refuse one.
bool handles_bidirectional(const std::string& name);
// Whether it computes them for a left-to-right model: every method but bivlrnn.
bool handles_left_to_right(const std::string& name);

}  // namespace vlrnn
