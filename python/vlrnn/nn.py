"""VLRNN's hand-written cells and C++ model kinds as ordinary PyTorch modules.

    vlrnn.nn.LSTM   torch.nn.LSTM's constructor arguments, parameter names and state_dict
                    layout (a trained nn.LSTM's state_dict loads into it), computed by
                    lstm_block: one input GEMM per block, a fused gate loop and a
                    hand-written backward over the whole block
    vlrnn.nn.GRU    likewise torch.nn.GRU, by gru_block (variant 'v3', LibTorch's formula,
                    by default; 'v4' computes the same function saving other activations;
                    'v1' / 'v2' apply the reset gate before the recurrent matrix multiply)
    vlrnn.nn.MinGRU, MinLSTM, LRU, SelectiveSSM
                    the linear recurrences, each layer's recurrence run by an in-block scan
                    with a hand-written backward (the C++ kinds mingru, minlstm, lru, ssm;
                    vlrnn/_cpp_rnn.py); bidirectional=True as torch.nn's

They work in any training loop (loss.backward()), take batch-first or time-major tensors
and PackedSequences, and work as the rnn of vlrnn.VLRNN (with batch_first=True, as VLRNN
calls its rnn). Every call runs the C++ model of the cells (vlrnn/cells/block_rnn.h: the
layers, the masks of padded steps) over the module's own parameters; inside vlrnn.VLRNN the
engine runs that model itself, with no Python call per block (engine_model); the gate work
runs as fused loops on the CPU, as LibTorch's ops elsewhere. Differences from torch.nn: no
proj_size; dropout between layers draws its masks one step at a time ([L-1, B, H] per
step; for a PackedSequence, for the sequences present at that step),
which makes any cut of the sequence into blocks exact. (torch.nn's draw one [T, B, H] mask
per layer and call: with two or more dropout layers, a cut interleaves the layers' draws
differently, and no block method can be exact for them.) While that dropout is on, VLRNN
calls the module per block, since only its calls draw a PackedSequence's masks that way.

Bidirectional modules (bidirectional=True: LSTM / GRU here or in torch.nn, and the linear
recurrences) run as the engine's bidirectional model (vlrnn/core/bidirectional.h): each
direction of each layer is the cells' C++ model over that direction's parameters (for
LSTM / GRU torch.nn's '_reverse' ones for the backward direction; for the linear
recurrences a one-layer C++ module), the backward direction of each sequence starting at
its own last valid step. Inside vlrnn.VLRNN they train with the bidirectional block method
(method 'bivlrnn', the default for them) or 'checkpoint' / 'full'. Their dropout between
layers is one [B, 2H] mask per step, drawn after the layer below ran.
Shapes: T = steps, B = batch, F = input features, H = hidden, L = layers, G = gates,
D = directions (1, or 2 when bidirectional).
"""
import math

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from . import _C
from ._adapters import EngineModel, stacked_directions
from ._compat import autocast_enabled
from ._cpp_rnn import LRU, MinGRU, MinLSTM, SelectiveSSM
from ._sequences import check_like_parameters, packed_order, packed_rows, rnn_input, rnn_output

__all__ = ["LSTM", "GRU", "MinGRU", "MinLSTM", "LRU", "SelectiveSSM"]


def _layer_tensors(module, layer, suffix=""):
    """Layer `layer`'s [w_ih, w_hh, b_ih, b_hh] ([w_ih, w_hh] with bias=False) under
    torch.nn's names; suffix '_reverse' for a bidirectional module's backward direction."""
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if module.bias else [])
    return [getattr(module, f"{name}_l{layer}{suffix}") for name in names]


def cell_model(cell, module, layers, suffix="", dropout=0.0):
    """The C++ model computing `layers` (a range) of `module`, in torch.nn's parameter layout,
    by the hand-written cell: 'lstm', or a GRU variant 'v1'..'v4'. It runs on the module's own
    tensors (shared, so gradients reach its parameters), read at every call, so that
    load_state_dict, .double() and optimizers act on what runs; state S x [L, B, H]."""
    if autocast_enabled():
        raise ValueError("vlrnn.nn.LSTM / GRU: torch.autocast is not supported by the "
                         "hand-written cells (they compute in the parameters' dtype); call them "
                         "outside autocast, with the module in the dtype you want, or use "
                         "torch.nn.LSTM / GRU")
    model = _C.block_rnn(cell, [_layer_tensors(module, layer, suffix) for layer in layers],
                         dropout)
    model.train(module.training)
    return model


def _direction_model(cell, module, layer, suffix):
    """One direction of one layer of a bidirectional torch.nn-layout module as the engine's
    left-to-right model: the hand-written cell over that direction's parameters."""
    return cell_model(cell, module, range(layer, layer + 1), suffix)


def bidirectional_engine_model(module, cell, dropout):
    """A bidirectional module in torch.nn's layout (LSTM / GRU with bidirectional=True) as
    the engine's Bidirectional model, with its state in both layouts: torch.nn's tuple of
    [2L, B, H] tensors (row 2l + d, d = 0 forward, 1 backward) and the engine's list
    (fwd_0..., bwd_0..., fwd_1..., ...) of [1, B, H] tensors."""
    layers = [(_direction_model(cell, module, layer, ""),
               _direction_model(cell, module, layer, "_reverse"))
              for layer in range(module.num_layers)]
    model = _C.Bidirectional(layers, dropout if module.num_layers > 1 else 0.0)
    model.train(module.training)
    return EngineModel(model, *stacked_directions(module.num_layers, 2 if cell == "lstm" else 1))


def _stock_cell(rnn):
    """'lstm' / 'v3' for a module whose forward is torch.nn.LSTM's / GRU's own, else None."""
    return {nn.LSTM.forward: "lstm", nn.GRU.forward: "v3"}.get(type(rnn).forward)


def per_call_dropout_layers(rnn):
    """Dropout layers of a torch.nn RNN whose masks it draws once per call (0 when not
    training or without dropout): what no cut into blocks reproduces once there are two."""
    return rnn.num_layers - 1 if rnn.training and rnn.dropout > 0 else 0


def why_not_own_forward(module):
    """Why calling `module` would compute something other than its class's forward over its
    registered parameters (forward hooks, parametrized weights), or None."""
    hooks = torch.nn.modules.module
    if module._forward_hooks or module._forward_pre_hooks or hooks._global_forward_hooks \
            or hooks._global_forward_pre_hooks:
        return "forward hooks"
    if torch.nn.utils.parametrize.is_parametrized(module):
        return "parametrized weights"
    return None


def _not_as_engine_model(module, why):
    """The ValueError for a bidirectional module whose function the engine's model would not
    compute (`why`): no call per block can compute it either."""
    return ValueError(f"rnn: a bidirectional {type(module).__name__} runs inside VLRNN only as "
                      f"the engine's bidirectional model, which cannot compute this one's "
                      f"function: {why}")


def _why_not_stock(rnn):
    """Why the hand-written cells would not compute a torch.nn.LSTM / GRU's own function
    as the engine calls it, or None when they do."""
    if not rnn.batch_first:
        return "batch_first=False (VLRNN calls its rnn batch-first)"
    if getattr(rnn, "proj_size", 0):
        return "proj_size > 0"
    if per_call_dropout_layers(rnn):
        return ("dropout between layers while training (torch.nn draws those masks once per "
                "call; vlrnn.nn's modules draw them per step)")
    if autocast_enabled():
        return "torch.autocast is on (the cells compute in the parameters' dtype)"
    own = why_not_own_forward(rnn)
    if own is not None:
        return own
    if any(p.dtype not in (torch.float32, torch.float64) for p in rnn.parameters()):
        return "parameters not in float32 / float64"
    return None


def on_the_cpu(module):
    """Whether every parameter of `module` is on the CPU."""
    return all(p.device.type == "cpu" for p in module.parameters())


def stock_engine_model(rnn):
    """For an unmodified torch.nn.LSTM or GRU, the engine's C++ model computing its function
    by the hand-written cells (an EngineModel; NOTE [ Python modules in the engine ]): the
    same function of the same parameters, with no Python call per block. None for any other
    module, and where the cells would not compute the module's own function (a forward
    overridden or hooked, proj_size, not in float32 / float64, batch_first=False, dropout
    between layers while training: torch.nn draws those masks per call, the cells per step).
    Off the CPU a left-to-right module is None too: called per block, it runs on cuDNN.
    Where torch runs its LSTM on oneDNN (float32 on 2.x's CPU), so does the cell, on the
    same primitive (docs/platforms.md, "The LSTM on oneDNN"). No block of a bidirectional
    module can be computed by calling it, so one runs as the cells on any device, and what
    keeps the cells from computing its function is a ValueError naming it."""
    cell = _stock_cell(rnn)
    if cell is None:
        return None
    why = _why_not_stock(rnn)
    if rnn.bidirectional:
        if why is not None:
            raise _not_as_engine_model(rnn, why)
        return bidirectional_engine_model(rnn, cell, 0.0)
    if why is not None or not on_the_cpu(rnn):
        return None
    return EngineModel(cell_model(cell, rnn, range(rnn.num_layers)), list, tuple)


class _BlockRNN(nn.Module):
    GATES = None  # 4 (LSTM) or 3 (GRU)
    STATES = None  # 2: (h, c), or 1: h

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} {arg}: expected an int >= 1, got {value!r}")
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) \
                or not 0 <= dropout < 1:
            raise ValueError(f"{name} dropout: expected a probability in [0, 1), got {dropout!r}")
        if not isinstance(bidirectional, bool):
            raise TypeError(f"{name} bidirectional: expected True or False, got "
                            f"{bidirectional!r}")
        if proj_size:
            raise ValueError(f"{name} proj_size: not supported by the hand-written cell")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, 0
        factory = {"device": device, "dtype": dtype}
        rows = self.GATES * hidden_size
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            width = input_size if layer == 0 else directions * hidden_size
            for suffix in ("", "_reverse")[:directions]:  # torch.nn's names and order
                self.register_parameter(f"weight_ih_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(rows, width, **factory)))
                self.register_parameter(f"weight_hh_l{layer}{suffix}",
                                        nn.Parameter(torch.empty(rows, hidden_size, **factory)))
                if bias:
                    self.register_parameter(f"bias_ih_l{layer}{suffix}",
                                            nn.Parameter(torch.empty(rows, **factory)))
                    self.register_parameter(f"bias_hh_l{layer}{suffix}",
                                            nn.Parameter(torch.empty(rows, **factory)))
        self.reset_parameters()

    def reset_parameters(self):
        """uniform(-1/sqrt(H), 1/sqrt(H)), in parameter order, as torch.nn draws them."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text

    def _cell(self):
        raise NotImplementedError

    def engine_model(self):
        """The engine's C++ model computing this module's function (an EngineModel,
        vlrnn/_adapters.py), which vlrnn.VLRNN runs with no Python call per block. Left to
        right, None where VLRNN must call the module per block instead: a subclass's own
        forward, forward hooks or parametrized weights, or dropout between layers while
        training (a PackedSequence's masks are drawn for the sequences present at each step,
        which only calls of the module reproduce block by block). A bidirectional module
        cannot be called per block, so for it those are a ValueError."""
        why = "a forward of its own" if type(self).forward is not _BlockRNN.forward \
            else why_not_own_forward(self)
        if why is not None:
            if self.bidirectional:
                raise _not_as_engine_model(self, why)
            return None
        if self.bidirectional:
            return bidirectional_engine_model(self, self._cell(), self.dropout)
        if self._draws_dropout():
            return None
        return EngineModel(self._model(), list, tuple)

    def _draws_dropout(self):
        """Whether a call draws dropout masks between layers."""
        return self.training and self.dropout > 0 and self.num_layers > 1

    def _model(self):
        return cell_model(self._cell(), self, range(self.num_layers), dropout=self.dropout)

    def _initial_state(self, hx, batch, like):
        name = type(self).__name__
        layers = "num_layers * 2" if self.bidirectional else "num_layers"
        shape = [self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size]
        if hx is None:
            return [like.new_zeros(shape) for _ in range(self.STATES)]
        tensors = [hx] if isinstance(hx, torch.Tensor) else list(hx)
        if len(tensors) != self.STATES or not all(isinstance(t, torch.Tensor) for t in tensors):
            expected = "(h, c)" if self.STATES == 2 else "h"
            raise TypeError(f"{name} hx: expected {expected}, tensors {shape}, got {hx!r:.80}")
        for i, t in enumerate(tensors):
            if list(t.shape) != shape:
                raise ValueError(f"{name} hx[{i}]: expected shape {shape} "
                                 f"[{layers}, B, H], got {list(t.shape)}")
            check_like_parameters(t, like, f"{name} hx[{i}]")
        return tensors

    def _dropout_masks(self, steps, batch, like, packed):
        """[T, L-1, B, H] masks scaled by 1/(1-p), drawn one step at a time: for the whole
        batch, or for a PackedSequence for the sequences present at each step (in its
        packing order), so that a block of the still-running sequences draws what the same
        steps of the whole batch draw."""
        keep = 1.0 - self.dropout
        shape = (self.num_layers - 1, self.hidden_size)
        if packed is None:
            masks = like.new_empty(steps, batch, *shape)
            for t in range(steps):
                masks[t].bernoulli_(keep)
        else:
            sizes = packed.batch_sizes
            rows = like.new_empty(int(sizes.sum()), *shape)  # packed rows, step by step
            for start, size in zip((torch.cumsum(sizes, 0) - sizes).tolist(), sizes.tolist()):
                rows[start:start + size].bernoulli_(keep)
            step_of, sequence_of = packed_rows(sizes, packed_order(packed))
            masks = like.new_zeros(steps, batch, *shape)
            masks[step_of.to(like.device), sequence_of.to(like.device)] = rows
        return masks.transpose(1, 2).div_(keep)

    def forward(self, input, hx=None):
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        x, lengths = rnn_input(input, self, name)
        steps, batch = x.shape[0], x.shape[1]
        state = self._initial_state(hx, batch, x)
        if self.bidirectional:
            # The engine's own model, so that full BPTT here and every method inside VLRNN
            # compute one function, dropout draws included.
            engine = bidirectional_engine_model(self, self._cell(), self.dropout)
            x, final = engine.model.forward(x, engine.to_engine(state), lengths)
            final = engine.from_engine(final)
        else:
            drop = None
            if self._draws_dropout():
                drop = self._dropout_masks(steps, batch, x, input if packed else None)
            x, final = self._model().forward_with_masks(x, list(state), lengths, drop)
            final = tuple(final)
        return rnn_output(x, input, self.batch_first), (final if self.STATES == 2 else final[0])


class LSTM(_BlockRNN):
    """torch.nn.LSTM's interface, computed by the hand-written lstm_block cell."""
    GATES, STATES = 4, 2

    def _cell(self):
        return "lstm"


class GRU(_BlockRNN):
    """torch.nn.GRU's interface, computed by the hand-written gru_block cell."""
    GATES, STATES = 3, 1

    def __init__(self, *args, variant="v3", **kwargs):
        if variant not in ("v1", "v2", "v3", "v4"):
            raise ValueError(f"GRU variant: expected 'v1', 'v2', 'v3' or 'v4', got {variant!r}")
        super().__init__(*args, **kwargs)
        self.variant = variant

    def extra_repr(self):
        return super().extra_repr() + f", variant={self.variant!r}"

    def _cell(self):
        return self.variant
