"""C++ model kinds as PyTorch modules: the linear recurrences (vlrnn.nn.MinGRU, MinLSTM, LRU,
SelectiveSSM) and any kind by name, a plugin's included (vlrnn.CppModel, cpp_model.py).

    rnn = vlrnn.nn.MinGRU(input_size, hidden_size, num_layers=2, batch_first=True)
    output, h_n = rnn(x)                             # as torch.nn.GRU's forward
    vlrnn.VLRNN(rnn, out, "MEAN", N=16)(x, y)        # exact block-wise BPTT

CppRecurrent builds the kind with the registry's make_model. Its parameters are the C++
module's own tensors (the same storage and .grad, so optimizers, state_dict and
load_state_dict act on what runs), under the C++ names with '.' made '_'
('layer0_proj_weight'). .double(), .float(), .cuda() and .to(device, dtype) move and convert
them in place (the C++ module moves its own tensors; device= at construction moves them once
drawn). forward follows torch.nn's RNNs:
input [T, B, F] ([B, T, F] with batch_first=True) or a PackedSequence, hx None (the kind's
initial state, zeros) or the state with every tensor's batch at dim 1; it returns
(output, h_n). bidirectional=True (the linear recurrences) is torch.nn's: L layers of a
one-layer module per direction, layer l + 1 reading both directions' outputs (2H), h_n
[2L, B, W] with row 2l + d; its parameters are named 'fwd_l0_layer0_proj_weight',
'bwd_l0_...'. Inside vlrnn.VLRNN the engine runs the C++ module itself (engine_model), on
every sequence of the batch with its lengths, as the `vlrnn` tool does: no Python per block,
and a bidirectional kind ('bilstm', 'bigru', 'bi:<kind>') reaches the bidirectional block
method as it is.
Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers, W = a state
tensor's width.
"""
import torch
from torch import nn

from . import _C
from ._adapters import EngineModel, as_state_tuple, stacked_directions
from ._sequences import check_like_parameters, rnn_input, rnn_output

DTYPES = (torch.float32, torch.float64)


class CppRecurrent(nn.Module):
    """A C++ model kind (vlrnn.model_kinds()) as an nn.Module (the module docstring)."""

    def __init__(self, kind, input_size, hidden_size, num_layers=1, dropout=0.0,
                 batch_first=False, dtype=None, bidirectional=False):
        super().__init__()
        name = type(self).__name__
        if not isinstance(kind, str):
            raise TypeError(f"{name} kind: expected a model kind (str), e.g. 'mingru', got "
                            f"{type(kind).__name__}")
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} {arg}: expected an int >= 1, got {value!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(f"{name} dropout: expected a probability in [0, 1), got {dropout!r}")
        for arg, value in (("batch_first", batch_first), ("bidirectional", bidirectional)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} {arg}: expected True or False, got {value!r}")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if dtype not in DTYPES:
            raise TypeError(f"{name} dtype: expected torch.float32 or torch.float64, got {dtype}")
        self.kind, self.batch_first = kind, batch_first
        self._stacked = None  # bidirectional=True: the state's two layouts
        if bidirectional:
            self.cpp = _bidirectional_kind(kind, input_size, hidden_size, num_layers, dropout)
            self._stacked = stacked_directions(num_layers, len(self.cpp.state_batch_dims())
                                               // (2 * num_layers))
        else:
            self.cpp = _C.make_model(kind, input_size, hidden_size, num_layers, float(dropout))
        self.cpp.to_like(torch.empty(0, dtype=dtype))
        for key, tensor in self.cpp.named_parameters():
            # The C++ tensors themselves (an nn.Parameter would be a copy that the C++
            # module never sees), under the C++ names with '.' made '_'.
            self._parameters[key.replace(".", "_")] = tensor
        self._batch_dims = self.cpp.state_batch_dims()
        self.input_size, self.hidden_size = self.cpp.input_size, hidden_size
        self.num_layers, self.dropout = num_layers, float(dropout)
        self.bidirectional = isinstance(self.cpp, _C.Bidirectional)

    def extra_repr(self):
        text = f"{self.kind!r}, {self.cpp.describe()}"
        return text + (", batch_first=True" if self.batch_first else "")

    def _apply(self, fn, *args, **kwargs):
        # Module._apply would put converted copies in the parameters' place, which the C++
        # module never sees; the C++ module moves and converts its own tensors instead, in
        # place, so these objects follow.
        tensors = list(self.parameters())
        if not tensors:
            return self
        converted = fn(tensors[0].detach())
        if converted.dtype != tensors[0].dtype and converted.dtype not in DTYPES:
            raise TypeError(f"{type(self).__name__}({self.kind!r}) dtype: expected "
                            f"torch.float32 or torch.float64, got {converted.dtype}")
        if (converted.device, converted.dtype) != (tensors[0].device, tensors[0].dtype):
            try:
                self.cpp.to_like(converted)
            except RuntimeError as error:  # set_data refuses e.g. the meta device
                raise TypeError(f"{type(self).__name__}({self.kind!r}): the C++ module's "
                                f"tensors cannot move to {converted.device} "
                                f"({str(error).splitlines()[0]})") from None
            for t in tensors:
                if t.grad is not None:
                    t.grad = t.grad.to(t.device, t.dtype)
        return self

    def train(self, mode=True):
        self.cpp.train(mode)
        return super().train(mode)

    def _to_cpp(self, tensors):
        if self._stacked is not None:
            return self._stacked[0](tensors)
        return [t.movedim(1, d) for t, d in zip(tensors, self._batch_dims)]

    def _from_cpp(self, tensors):
        if self._stacked is not None:
            return self._stacked[1](tensors)
        return tuple(t.movedim(d, 1) for t, d in zip(tensors, self._batch_dims))

    def _state_out(self, state):
        """h_n as forward returns it: one tensor when the state is one tensor (as
        torch.nn.GRU's), else the tuple."""
        return state[0] if len(state) == 1 else state

    def _initial_state(self, hx, batch, like):
        """The state in the C++ layout: the kind's initial state, or hx checked."""
        if hx is None:
            return self.cpp.initial_state(batch, like)
        name = type(self).__name__
        tensors = as_state_tuple(hx, f"{name} hx")
        expected = [list(t.shape) for t in self._from_cpp(self.cpp.initial_state(batch, like))]
        if len(tensors) != len(expected):
            raise ValueError(f"{name} hx: expected a state of {len(expected)} tensor(s) "
                             f"{expected}, got {len(tensors)}")
        for i, (t, shape) in enumerate(zip(tensors, expected)):
            if list(t.shape) != shape:
                raise ValueError(f"{name} hx[{i}]: expected shape {shape} (batch at dim 1), "
                                 f"got {list(t.shape)}")
            check_like_parameters(t, like, f"{name} hx[{i}]")
        return self._to_cpp(tensors)

    def engine_model(self):
        """The C++ module itself for the engine, with the state's two layouts (vlrnn.VLRNN
        and vlrnn.verify use it; NOTE [ Python modules in the engine ])."""
        return EngineModel(self.cpp, lambda tensors: self._to_cpp(tensors),
                           lambda tensors: self._from_cpp(tensors))

    def forward(self, input, hx=None):
        name = type(self).__name__
        x, lengths = rnn_input(input, self, name)
        z, state = self.cpp.forward(x, self._initial_state(hx, x.shape[1], x), lengths)
        state = self._state_out(self._from_cpp(state))
        return rnn_output(z, input, self.batch_first), state


def _bidirectional_kind(kind, input_size, hidden_size, num_layers, dropout):
    """torch.nn's bidirectional=True over a left-to-right kind: L layers, each a one-layer
    `kind` per direction (layer l + 1 reads both directions' outputs, 2H), dropout between
    layers: the engine's Bidirectional (one [B, 2H] mask per step)."""
    if isinstance(num_layers, int) and num_layers < 1:
        raise ValueError(f"num_layers: expected >= 1, got {num_layers}")
    layers = []
    for layer in range(num_layers):
        width = input_size if layer == 0 else 2 * hidden_size
        layers.append(tuple(_C.make_model(kind, width, hidden_size, 1, 0.0) for _ in range(2)))
    return _C.Bidirectional(layers, float(dropout))  # checks it; none above the top layer


class _LinearKind(CppRecurrent):
    KIND = None

    def __init__(self, input_size, hidden_size, num_layers=1, dropout=0.0, batch_first=False,
                 bidirectional=False, device=None, dtype=None):
        super().__init__(self.KIND, input_size, hidden_size, num_layers, dropout, batch_first,
                         dtype, bidirectional)
        if device is not None:
            self.to(device)  # drawn on the CPU by the C++ kind, then moved

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text + (", batch_first=True" if self.batch_first else "")


class MinGRU(_LinearKind):
    """minGRU (Feng et al. 2024): z = σ(W_z x), h̃ = W_h x, h_t = (1 - z) h_{t-1} + z h̃;
    h_n [L, B, H] (vlrnn/cells/min_rnn.h)."""
    KIND = "mingru"


class MinLSTM(_LinearKind):
    """minLSTM (Feng et al. 2024), normalised forget and input gates; h_n [L, B, H]
    (vlrnn/cells/min_rnn.h)."""
    KIND = "minlstm"


class LRU(_LinearKind):
    """The Linear Recurrent Unit (Orvieto et al. 2023), a complex diagonal recurrence;
    h_n = (h_re, h_im), each [L, B, H] (vlrnn/cells/lru.h)."""
    KIND = "lru"


class SelectiveSSM(_LinearKind):
    """A diagonal selective state-space layer in the style of Mamba (N = 4 states per
    channel); h_n [L, B, H * 4] (vlrnn/cells/selective_ssm.h)."""
    KIND = "ssm"
