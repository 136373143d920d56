"""The API of the original Python VLRNN, on VLRNN's C++ engine.

    rnn(x, h) -> (z, h)         an RNNModule, or any nn.Module called so (nn.GRU, nn.LSTM
                                with batch_first=True): x batch-first [B, T, F] or a
                                PackedSequence; h a tensor or tuple of tensors [layers, B, ...]
    out(z, y) -> loss [B, T]    an OutputModule: the per-step loss of batch-first z and y
    PlainRNN(rnn, out, loss_scaling)(x, y, h0) -> (loss, loss_seq, h)
                                full BPTT in PyTorch; the caller calls loss.backward()
    VLRNN(rnn, out, loss_scaling, N)(x, y, h0, N=...) -> (loss, loss_seq, h)
                                the gradients computed inside (accumulated into .grad), the
                                loss returned detached

loss_scaling: 'SUM' sums the per-step losses of every valid step; 'MEAN' averages each
sequence over its own valid steps, then over the batch. Shapes: B = batch, T = steps.
"""
import abc

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from . import _C
from ._engine import EngineCall, check_method_fits, check_module, grads_kept_on_error, \
    reduction_of
from ._sequences import from_time_major, pack_like


class RNNModule(nn.Module, abc.ABC):
    """A recurrent module: forward(x, h) -> (z, h), x batch-first [B, T, F] or a
    PackedSequence, h None, a tensor or a tuple of tensors, each [layers, B, ...].
    `class GRU(nn.GRU, RNNModule): pass` makes one of torch.nn.GRU(batch_first=True)."""

    @abc.abstractmethod
    def forward(self, x, h):
        ...


class OutputModule(nn.Module, abc.ABC):
    """A per-step head and loss: forward(z, y) -> loss [B, T], z and y batch-first."""

    @abc.abstractmethod
    def forward(self, z, y):
        ...


def _check_blocks(N, name="N"):
    if N is None:
        return None
    if isinstance(N, bool) or not isinstance(N, int):
        raise TypeError(f"{name}: expected a number of blocks (an int >= 1), got "
                        f"{type(N).__name__}")
    if N < 1:
        raise ValueError(f"{name}: expected a number of blocks >= 1, got {N}")
    return N


def _check_method(method):
    if method is None:
        return None
    if not isinstance(method, str):
        raise TypeError(f"method: expected a method spec such as 'vlrnn:block=128' or "
                        f"'planner:percent=10', got {type(method).__name__}")
    _C.make_method(method)  # ValueError listing the known names and options
    return method


class PlainRNN(nn.Module):
    """Full backpropagation through time in plain PyTorch: the reference VLRNN matches."""

    def __init__(self, rnn, out, loss_scaling="MEAN"):
        super().__init__()
        check_module(rnn, "rnn")
        check_module(out, "out")
        reduction_of(loss_scaling)
        self.rnn, self.out, self.loss_scaling = rnn, out, loss_scaling

    def forward(self, x, y, h0=None):
        z, h = self.rnn(x, h0)[:2]
        if isinstance(x, PackedSequence):
            if not isinstance(y, PackedSequence):
                raise TypeError(f"y: expected a PackedSequence like x, got {type(y).__name__}")
            steps = int(x.batch_sizes.shape[0])
            z_padded, lengths = pad_packed_sequence(z, batch_first=True, total_length=steps)
            y_padded, _ = pad_packed_sequence(y, batch_first=True, total_length=steps)
            losses = self.out(z_padded, y_padded)  # [B, T]
            if isinstance(losses, (tuple, list)):
                losses = losses[0]
            valid = torch.arange(steps).unsqueeze(0) < lengths.unsqueeze(1)  # [B, T]
            losses = torch.where(valid.to(losses.device), losses, torch.zeros_like(losses))
            per_sequence = losses.sum(1)
            if self.loss_scaling == "MEAN":
                per_sequence = per_sequence / lengths.to(losses.device, losses.dtype)
            loss = per_sequence.mean() if self.loss_scaling == "MEAN" else per_sequence.sum()
            return loss, pack_like(losses.transpose(0, 1), x), h
        losses = self.out(z, y)
        if isinstance(losses, (tuple, list)):
            losses = losses[0]
        loss = losses.mean() if self.loss_scaling == "MEAN" else losses.sum()
        return loss, losses, h


class VLRNN(PlainRNN):
    """Exact BPTT in blocks, computed inside the call by VLRNN's C++ engine.

    N: the number of blocks, the sequence cut along time as torch.chunk(x, N, dim=1) cuts
    it (blocks of ceil(T / N) steps). method: any gradient method spec instead
    ('vlrnn:block=128', 'planner:percent=10', 'planner:budget=BYTES', 'checkpoint',
    'revolve:slots=8', 'tbptt:k=100', 'full'; vlrnn.methods() lists them). With neither,
    blocks of ceil(sqrt(T)) steps. A bidirectional rnn (bidirectional=True, or a bidirectional
    C++ kind) runs the bidirectional block method, 'bivlrnn' (N= cuts its blocks), or
    'checkpoint' / 'full'; any other method is refused with a ValueError.

    fast_cells: an unmodified torch.nn.LSTM / GRU (batch_first=True) is run by VLRNN's
    hand-written cells (the same function of its own parameters: vlrnn.nn), without a Python
    call per block; False calls the module itself (not possible for a bidirectional one,
    which runs only by the cells). Either way, modules that are not stock torch.nn.LSTM / GRU
    are called as they are, and C++-backed ones (vlrnn.nn.MinGRU, ..., vlrnn.CppModel,
    bidirectional vlrnn.nn.LSTM / GRU) are run by the engine with no Python call per block.
    """

    def __init__(self, rnn, out, loss_scaling="MEAN", N=None, method=None, fast_cells=True):
        super().__init__(rnn, out, loss_scaling)
        self.N = _check_blocks(N)
        self.method = _check_method(method)
        if not isinstance(fast_cells, bool):
            raise TypeError(f"fast_cells: expected True or False, got {fast_cells!r}")
        self.fast_cells = fast_cells
        self.last_counters = None  # steps run by the last call (forward, no-grad, backward)
        self._methods = {}  # spec -> the engine's method, kept: the planner plans once

    def _wants_gradients(self, x, h0):
        if not torch.is_grad_enabled():
            return False
        tensors = list(self.rnn.parameters()) + list(self.out.parameters())
        tensors.append(x.data if isinstance(x, PackedSequence) else x)
        if h0 is not None:
            tensors += [h0] if isinstance(h0, torch.Tensor) else list(h0)
        return any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)

    def __getstate__(self):
        # The engine's methods are C++ objects: a copy or a pickle starts without them.
        state = self.__dict__.copy()
        state["_methods"] = {}
        return state

    def method_for(self, N=None, method=None):
        """The spec a call runs: method= first, then N= (the call's, then the object's)."""
        method = _check_method(method) or self.method
        N = _check_blocks(N)
        if method is not None and N is not None:
            raise ValueError(f"give N (blocks) or method, not both (got N={N}, "
                             f"method={method!r})")
        if method is not None:
            return method
        N = N if N is not None else self.N
        # A bidirectional rnn's block method is bivlrnn (same options as vlrnn's).
        base = "bivlrnn" if getattr(self.rnn, "bidirectional", False) is True else "vlrnn"
        return f"{base}:blocks={N}" if N is not None else base

    def forward(self, x, y, h0=None, N=None, method=None):
        spec = self.method_for(N, method)
        if not self._wants_gradients(x, h0):
            # Evaluation (torch.no_grad(), or nothing requires grad): the loss alone, in one
            # pass without a graph, as the original computes it there.
            with torch.no_grad():
                return super().forward(x, y, h0)
        call = EngineCall(self.rnn, self.out, x, y, h0, self.fast_cells)
        if spec not in self._methods:
            self._methods[spec] = _C.make_method(spec)
        check_method_fits(self._methods[spec], call.model)
        with grads_kept_on_error(call.grad_tensors):
            result = _C.compute(self._methods[spec], reduction=reduction_of(self.loss_scaling),
                                **call.engine_args())
            call.accumulate_h0_grad()
        self.last_counters = result["counters"]
        loss_seq = from_time_major(result["step_losses"], call.batch)
        return result["loss"], loss_seq, call.final_state(result["final_state"])
