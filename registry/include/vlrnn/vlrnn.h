#pragma once
// Everything a user of VLRNN needs: core types, built-in models and heads, and the
// registries of gradient methods, model kinds and heads. It lives in the registry layer because it
// names headers from every layer below (docs/architecture.md).

#include "vlrnn/cells/lstm_block.h"
#include "vlrnn/cells/gru_block.h"
#include "vlrnn/core/heads.h"
#include "vlrnn/core/loss.h"
#include "vlrnn/core/models.h"
#include "vlrnn/core/sequence.h"
#include "vlrnn/core/state.h"
#include "vlrnn/distributed/data_parallel.h"
#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/registry/heads.h"
#include "vlrnn/registry/methods.h"
#include "vlrnn/registry/models.h"
#include "vlrnn/schedule/online_stream.h"
