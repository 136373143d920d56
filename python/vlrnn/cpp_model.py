"""A C++ model kind (a built-in, or a plugin's) as an RNNModule.

    vlrnn.load_plugin("build/examples/indrnn_plugin.so")   # its vlrnn_register_plugin()
    rnn = vlrnn.CppModel("indrnn", input_size=4, hidden_size=16)
    vlrnn.VLRNN(rnn, out, "MEAN", N=8)(x, y)

CppModel(kind, input_size, hidden_size, num_layers=1, dropout=0.0, dtype=torch.float32)
builds the kind with the registry's make_model (vlrnn/_cpp_rnn.py: its parameters are the
C++ module's own tensors, converted in place by .double() / .to(dtype)). Inside VLRNN the
engine runs the C++ module itself, on the whole batch with lengths, as the `vlrnn` tool
does; a bidirectional kind ('bilstm', 'bigru', 'bi:<kind>') thus trains with method
'bivlrnn' (the default for it), 'checkpoint' or 'full'. forward(x, h) takes x batch-first
[B, T, F] or a PackedSequence and h None or the state with each tensor's batch at dim 1,
and returns the state as a tuple, as every RNNModule's.
Shapes: T = steps, B = batch, F = input features, H = hidden.
"""
import torch

from . import _C
from ._cpp_rnn import CppRecurrent
from .modules import RNNModule


def load_plugin(path):
    """Loads a plugin (a shared library exporting extern "C" vlrnn_register_plugin(), NOTE
    [ Plugins ] in experiments/lib/user_models.h): its model kinds and methods become known
    by name here, as `vlrnn --plugin PATH` makes them known to the tool."""
    _C.load_plugin(str(path))


def model_kinds():
    """Every C++ model kind: the built-ins and those of loaded plugins (and 'bi:<kind>', a
    bidirectional layer of any left-to-right one)."""
    return list(_C.model_kinds())


class CppModel(CppRecurrent, RNNModule):
    def __init__(self, kind, input_size, hidden_size, num_layers=1, dropout=0.0,
                 dtype=torch.float32):
        super().__init__(kind, input_size, hidden_size, num_layers, dropout, batch_first=True,
                         dtype=dtype)

    def _state_out(self, state):
        return state  # a tuple, whatever its length

    def forward(self, x, h=None):
        return super().forward(x, h)
