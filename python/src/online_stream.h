#pragma once
// vlrnn._C.OnlineStream: the engine's stream of unknown length (vlrnn/schedule/online_stream.h)
// on a model and head made by the Python layer (python/vlrnn/stream.py calls it).

#include <torch/extension.h>

namespace vlrnn::python {

void bind_online_stream(pybind11::module_& m);

}  // namespace vlrnn::python
