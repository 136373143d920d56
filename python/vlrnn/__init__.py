"""VLRNN: exact backpropagation through time in blocks, for very long sequences.

Full BPTT keeps every activation of every step; VLRNN stores the state at each block's
entry in one pass without gradients, then recomputes and back-propagates the blocks last
to first, getting the same gradients with memory nearly flat in sequence length.

    import vlrnn
    model = vlrnn.VLRNN(rnn, out, "MEAN")          # rnn(x, h) -> (z, h); out(z, y) -> [B, T]
    loss, loss_seq, h = model(x, y, h0, N=40)      # gradients are in .grad; loss is detached
    optimizer.step()

The API of the original Python VLRNN (RNNModule, OutputModule, PlainRNN, VLRNN), on a C++
engine that also offers every other gradient method (method='planner:percent=10', ...),
a verifier (vlrnn.verify, vlrnn.assert_exact), hand-written cells (vlrnn.nn.LSTM,
vlrnn.nn.GRU, bidirectional too), the linear recurrences with in-block scans
(vlrnn.nn.MinGRU, MinLSTM, LRU, SelectiveSSM), TorchScript model files of `vlrnn verify
--model-file` (vlrnn.ModelFile) and C++ model kinds, a plugin's included (vlrnn.load_plugin,
vlrnn.CppModel).

A bidirectional rnn (torch.nn.LSTM / GRU or vlrnn.nn.LSTM / GRU with bidirectional=True,
vlrnn.CppModel('bilstm' / 'bigru' / 'bi:<kind>')) trains with the bidirectional block
method, 'bivlrnn', which VLRNN picks for it:

    rnn = torch.nn.LSTM(F, H, bidirectional=True, batch_first=True)   # z_t: [fwd, bwd], 2H
    loss, loss_seq, h = vlrnn.VLRNN(rnn, out, "MEAN", N=40)(x, y)     # method bivlrnn

A stream of unknown length (a sensor, an environment) pushes its chunks as they come and gets
the whole stream's exact gradient at the end, its states within a budget set up front:

    stream = vlrnn.Stream(rnn, out, "MEAN", slots=8)
    for x, y in chunks:
        stream.push(x, y)
    loss, loss_seq, h = stream.finish()
"""
import torch  # first: the extension links the LibTorch that torch loads

from . import _C, nn
from .cpp_model import CppModel, load_plugin, model_kinds
from .model_file import ModelFile
from .modules import OutputModule, PlainRNN, RNNModule, VLRNN
from .stream import Stream
from .verification import BIDIRECTIONAL_METHODS, DEFAULT_METHODS, VerifyReport, VerifyRow, \
    assert_exact, verify

__version__ = "0.1.0"  # the CMake project's VERSION (tests/python/test_api_docs.py checks)

__all__ = ["__version__", "RNNModule", "OutputModule", "PlainRNN", "VLRNN", "verify", "assert_exact",
           "VerifyReport", "VerifyRow", "DEFAULT_METHODS", "BIDIRECTIONAL_METHODS", "methods",
           "nn", "ModelFile", "CppModel", "load_plugin", "model_kinds", "Stream"]


def methods():
    """The gradient methods, {name: one-line summary}; a spec is 'name' or
    'name:key=value,...' (e.g. 'vlrnn:block_length=128', 'planner:percent=10')."""
    return dict(_C.methods())
