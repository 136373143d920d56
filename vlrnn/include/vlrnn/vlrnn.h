#pragma once
// Everything a user of VLRNN needs: core types, built-in models and heads, and the
// gradient-method registry.

#include "vlrnn/cells/block_lstm.h"
#include "vlrnn/cells/gru_variants.h"
#include "vlrnn/core/heads.h"
#include "vlrnn/core/loss.h"
#include "vlrnn/core/models.h"
#include "vlrnn/core/sequence.h"
#include "vlrnn/core/state.h"
#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/methods/registry.h"
