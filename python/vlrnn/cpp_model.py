"""A C++ model kind (a built-in, or a plugin's) as an RNNModule.

    vlrnn.load_plugin("build/examples/indrnn_plugin.so")   # its vlrnn_register_plugin()
    rnn = vlrnn.CppModel("indrnn", input_size=4, hidden_size=16)
    vlrnn.VLRNN(rnn, out, "MEAN", N=8)(x, y)

CppModel(kind, input_size, hidden_size, num_layers=1, dropout=0.0, dtype=torch.float32)
builds the kind with the registry's make_model. Its parameters are the C++ module's own
tensors (the same storage and .grad, so an optimizer and state_dict work on them); the
dtype is fixed at construction (.to() / .double() would put copies in their place, and are
refused). Inside VLRNN the engine calls the C++ module on the whole batch with lengths, as
the `vlrnn` tool does; forward(x, h) takes x batch-first [B, T, F] or a PackedSequence and
h None or the state with each tensor's batch at dim 1, as every RNNModule's.
Shapes: T = steps, B = batch, F = input features, H = hidden.
"""
import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from . import _C
from ._sequences import pack_like
from .modules import RNNModule


def load_plugin(path):
    """Loads a plugin (a shared library exporting extern "C" vlrnn_register_plugin(), NOTE
    [ Plugins ] in experiments/lib/user_models.h): its model kinds and methods become known
    by name here, as `vlrnn --plugin PATH` makes them known to the tool."""
    _C.load_plugin(str(path))


def model_kinds():
    """Every C++ model kind: the built-ins and those of loaded plugins."""
    return list(_C.model_kinds())


class CppModel(RNNModule):
    def __init__(self, kind, input_size, hidden_size, num_layers=1, dropout=0.0,
                 dtype=torch.float32):
        super().__init__()
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self.kind = kind
        self.cpp = _C.make_model(kind, input_size, hidden_size, num_layers, dropout)
        self.cpp.to_dtype(dtype == torch.float64)
        for name, tensor in self.cpp.named_parameters():
            # The C++ tensors themselves (an nn.Parameter would be a copy that the C++
            # module never sees), under the C++ names with '.' made '_'.
            self._parameters[name.replace(".", "_")] = tensor
        self._batch_dims = self.cpp.state_batch_dims()
        self.input_size = self.cpp.input_size

    def extra_repr(self):
        return f"{self.kind!r}, {self.cpp.describe()}"

    def _apply(self, fn, *args, **kwargs):
        raise TypeError(f"CppModel({self.kind!r}): the C++ module's tensors cannot be converted "
                        "or moved from Python; give dtype= when constructing it")

    def train(self, mode=True):
        self.cpp.train(mode)
        return super().train(mode)

    def _to_cpp(self, state, batch, like):
        if state is None:
            return self.cpp.initial_state(batch, like)
        tensors = (state,) if isinstance(state, torch.Tensor) else tuple(state)
        return [t.movedim(1, d) for t, d in zip(tensors, self._batch_dims)]

    def _from_cpp(self, state):
        return tuple(t.movedim(d, 1) for t, d in zip(state, self._batch_dims))

    def engine_block(self):
        """The engine's block function: the C++ module on every sequence with lengths."""
        def block(x, state, lengths):
            z, state = self.cpp.forward(x, self._to_cpp(state, x.shape[1], x), lengths)
            return z, self._from_cpp(state)
        return block

    def forward(self, x, h=None):
        if isinstance(x, PackedSequence):
            x_tm, lengths = pad_packed_sequence(x)  # [T, B, F], the caller's order
        else:
            x_tm, lengths = x.transpose(0, 1), None
        z, state = self.cpp.forward(x_tm, self._to_cpp(h, x_tm.shape[1], x_tm), lengths)
        state = self._from_cpp(state)
        if isinstance(x, PackedSequence):
            return pack_like(z, x), state
        return z.transpose(0, 1), state
