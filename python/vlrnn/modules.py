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
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from . import _C
from ._compat import not_compiled, warn_caller
from ._data_parallel import DataParallel, unwrapped
from ._engine import EngineCall, autocast_cache_off, check_method_fits, check_module, \
    cut_dependence, gradient_hooks_held, gradients_as_one_backward, inexact_parts, \
    interrupts_kept, loss_scale_of, reduction_of, warn_if_thread_pools_fight
from ._progress import progress_args
from ._sequences import batch_from, from_time_major, pack_like, resets_from


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
        raise TypeError(f"method: expected a method spec such as 'vlrnn:block_length=128' or "
                        f"'planner:percent=10', got {type(method).__name__}")
    _C.make_method(method)  # ValueError listing the known names and options
    return method


def _run_in_segments(rnn, x, h0, resets):
    """(z, h) of rnn on x (batch-first [B, T, F], or packed) with resets ([T, B] bool, from
    resets_from()): one call per stretch between steps where some sequence restarts, its
    state there replaced by its initial one (h0's row, or zeros), as run_model() does in the
    engine. With a packed x, each call gets the sequences that reach the stretch, packed."""
    packed = isinstance(x, PackedSequence)
    if packed:
        padded, lengths = pad_packed_sequence(x, batch_first=True)  # [B, T, F], [B]
    else:
        padded = x
        lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.int64)
    steps = padded.shape[1]
    cuts = [0] + [t for t in range(1, steps) if bool(resets[t].any())] + [steps]
    h, z_pieces = h0, []
    for a, b in zip(cuts[:-1], cuts[1:]):
        if a > 0 and bool(resets[a].any()):
            tensors = _tensors(h)
            initial = _tensors(h0) if h0 is not None else [torch.zeros_like(t) for t in tensors]
            shape = [1, -1]  # the batch at dim 1: [layers, B, ...]
            restarted = [torch.where(resets[a].to(t.device).view(shape + [1] * (t.dim() - 2)),
                                     i, t) for t, i in zip(tensors, initial)]
            h = restarted[0] if isinstance(h, torch.Tensor) else tuple(restarted)
        if not packed:
            z, h = rnn(padded[:, a:b], h)[:2]
            z_pieces.append(z)
            continue
        valid = (lengths - a).clamp(0, b - a)  # [B] steps of each sequence in the stretch
        alive = (valid > 0).nonzero().flatten()
        piece = pack_padded_sequence(padded[alive, a:b], valid[alive], batch_first=True,
                                     enforce_sorted=False)
        tensors = None if h is None else _tensors(h)
        z, h_alive = rnn(piece, None if h is None else _state_like(
            h, [t.index_select(1, alive.to(t.device)) for t in tensors]))[:2]
        z, _ = pad_packed_sequence(z, batch_first=True, total_length=b - a)  # [b', n, Z]
        z_piece = z.new_zeros((padded.shape[0],) + tuple(z.shape[1:]))
        z_pieces.append(z_piece.index_copy(0, alive.to(z.device), z))
        if h is None:
            h = h_alive  # the first stretch: every sequence is alive
        else:
            h = _state_like(h, [t.index_copy(1, alive.to(t.device), s)
                                for t, s in zip(tensors, _tensors(h_alive))])
    z = torch.cat(z_pieces, 1)  # [B, T, Z]
    if packed:
        z = pack_padded_sequence(z, lengths, batch_first=True, enforce_sorted=False)
    return z, h


def _tensors(state):
    """A state's tensors as a list: one tensor, or a tuple's."""
    return [state] if isinstance(state, torch.Tensor) else list(state)


def _state_like(state, tensors):
    """tensors in the form of `state`: one tensor, or a tuple."""
    return tensors[0] if isinstance(state, torch.Tensor) else tuple(tensors)


class PlainRNN(nn.Module):
    """Full backpropagation through time in plain PyTorch: the reference VLRNN matches.

    PlainRNN(rnn, out, loss_scaling='MEAN'): rnn(x, h) -> (z, h) and out(z, y) -> per-step
    loss [B, T] as in the module docstring of vlrnn.modules; loss_scaling 'MEAN' or 'SUM'.
    """

    def __init__(self, rnn, out, loss_scaling="MEAN"):
        super().__init__()
        check_module(rnn, "rnn")
        check_module(out, "out")
        reduction_of(loss_scaling)
        self.rnn, self.out, self.loss_scaling = rnn, out, loss_scaling

    def forward(self, x, y, h0=None, resets=None):
        """(loss, loss_seq, h) of one call of rnn on the whole sequence and out on its output;
        the caller back-propagates: loss.backward().

        x: batch-first [B, T, F], or a PackedSequence; y: [B, T, ...] targets, or a
        PackedSequence with x's lengths; h0: None, or the rnn's state (a tensor or a tuple of
        tensors [layers, B, ...]). resets: None, or where sequences start a new segment (an
        episode, a document) from the initial state, h0's row or zeros: a bool mask [B, T],
        or segment starts as in cu_seqlens (a list of B integer tensors; one tensor when
        B = 1); the rnn is then called once per stretch between resets. Returns loss (a
        scalar, with its graph), loss_seq (the per-step losses [B, T], packed as x when x is
        packed) and h (the final state)."""
        mask = None if resets is None else resets_from(resets, batch_from(x, y))
        if mask is not None and getattr(unwrapped(self.rnn), "bidirectional", False) is True:
            raise ValueError("resets: PlainRNN calls the rnn once per stretch between resets, "
                             "which cuts a bidirectional rnn's backward direction; use "
                             "VLRNN(..., method='full') (or any bidirectional method), whose "
                             "engine restarts each direction at its segment's edge")
        z, h = self.rnn(x, h0)[:2] if mask is None else _run_in_segments(self.rnn, x, h0, mask)
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

    The gradients are those of PlainRNN's loss.backward() (to 1e-10 in float64), but the
    call computes them itself: it accumulates them into .grad (of the parameters, and of
    h0 and x when they require grad) and returns the loss detached. Memory holds one
    block's activations and one state per block, not the whole sequence's.

    What a module may return, and what the call checks (ValueError / TypeError naming it):
    rnn(x_block, h) -> (z, h) with z batch-first [B, Tb, Z] (or a PackedSequence of the
    block's sequences: any packing of them, read through its own sorted_indices) and h in
    the layout it was given (same dtype and device); it must not change x or h in place,
    nor call backward(); out(z, y) -> per-step loss [B, Tb] that depends on z. A module
    whose output depends on where the sequence is cut is refused (below); vlrnn.verify
    shows the gradients' error for any module.
    """

    def __init__(self, rnn, out, loss_scaling="MEAN", N=None, method=None, fast_cells=True,
                 check_cuts=True, progress=True):
        """rnn, out: the recurrent module and the head, as for PlainRNN. loss_scaling: 'SUM'
        sums every valid step's loss; 'MEAN' averages each sequence over its own valid steps,
        then over the batch.

        N: the number of blocks, the sequence cut along time as torch.chunk(x, N, dim=1) cuts
        it (blocks of ceil(T / N) steps). method: any gradient method spec instead
        ('vlrnn:block_length=128', 'planner:percent=10', 'planner:budget=BYTES', 'checkpoint',
        'revolve:slots=8', 'tbptt:k=100', 'full'; vlrnn.methods() lists them). With neither,
        blocks of ceil(sqrt(T)) steps, shortened on the CPU (to no less than a quarter) so
        that a block's states fit the L2 cache. A bidirectional rnn (bidirectional=True, or a
        bidirectional C++ kind) runs the bidirectional block method, 'bivlrnn' (N= cuts its
        blocks), or 'checkpoint' / 'full'; any other method is refused with a ValueError.

        fast_cells: an unmodified torch.nn.LSTM / GRU (batch_first=True) is run by VLRNN's
        hand-written cells (the same function of its own parameters: vlrnn.nn), without a
        Python call per block; False calls the module itself (not possible for a
        bidirectional one, which runs only by the cells). Either way, modules that are not
        stock torch.nn.LSTM / GRU are called as they are, and C++-backed ones
        (vlrnn.nn.MinGRU, ..., vlrnn.CppModel, bidirectional vlrnn.nn.LSTM / GRU) are run by
        the engine with no Python call per block.

        check_cuts: on the first call in each training mode (and, apart, the first with a
        packed batch), run the rnn (and the head) on the first steps whole and cut in two,
        from one generator state, and refuse a module whose outputs differ (dropout drawn
        once per call; on a packed batch, with a sequence ending by the cut, statistics
        over the padded batch: no block method can be exact for it), or differ with and
        without gradients, or whose gradients differ cut and whole (a module detaching the
        state it is given); a module that passes here only thanks to this CPU generator's
        layout gets a RuntimeWarning. A few steps' forward and backward passes, once.
        Modules the package recognises as cut-dependent (torch.nn's LSTM / GRU / RNN with
        two or more dropout layers while training, one on a GPU; parts that change buffers
        as they run, such as BatchNorm or spectral_norm while training) are refused
        whatever this says, unless method='full'.

        progress: warn (RuntimeWarning) before a schedule whose recomputation grows faster
        than T, and print a line on stderr every 10 s once a call has run for 10 s.
        """
        super().__init__(rnn, out, loss_scaling)
        self.N = _check_blocks(N)
        self.method = _check_method(method)
        for name, value in (("fast_cells", fast_cells), ("check_cuts", check_cuts),
                            ("progress", progress)):
            if not isinstance(value, bool):
                raise TypeError(f"{name}: expected True or False, got {value!r}")
        self.fast_cells = fast_cells
        self.check_cuts = check_cuts
        self.progress = progress
        self.last_counters = None  # steps run by the last call (forward, no-grad, backward)
        self._methods = {}  # spec -> the engine's method, kept: the planner plans once
        self._cuts_checked = set()  # (rnn.training, out.training, packed) of the checks passed
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

    def __setstate__(self, state):
        state.setdefault("check_cuts", True)  # pickled before these existed
        state.setdefault("progress", True)
        state.setdefault("_cuts_checked", set())
        super().__setstate__(state)

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
        bidirectional = getattr(unwrapped(self.rnn), "bidirectional", False) is True
        base = "bivlrnn" if bidirectional else "vlrnn"
        return f"{base}:num_blocks={N}" if N is not None else base

    @not_compiled  # NOTE [ The engine runs untraced ] (_compat.py)
    def forward(self, x, y, h0=None, N=None, method=None, grad_h=None, resets=None,
                grad_scaler=None):
        """(loss, loss_seq, h): the gradients computed and accumulated into .grad.

        x: batch-first [B, T, F], or a PackedSequence; y: targets [B, T, ...], or a
        PackedSequence with x's lengths; h0: None (the rnn's own initial state) or its state,
        a tensor or tuple of tensors [layers, B, ...] (its .grad gets dL/dh0 when it requires
        grad). N / method: this call's, instead of the constructor's (not both).
        grad_h: None, or the gradient of a later loss with respect to the final state h
        (what a next call on the same stream gives as its h0's .grad), in h's layout: the
        gradients then include that later loss's share through h. Sequence b's final state
        is its state after its own last step, so its grad_h reaches that step. A stream cut
        into calls, run forward with each call's h as the next one's h0 and then backward
        from the last call to the first, each handed the next call's h0.grad as grad_h, gets
        the whole stream's gradients (loss_scaling='SUM'; examples/python/chunked_stream.py).
        resets: None, or where sequences start a new segment from their initial state (h0's
        row, or zeros), as episodes or documents packed into one stream: a bool mask [B, T]
        (batch-first), or segment starts as in cu_seqlens (a list of B integer tensors; one
        tensor when B = 1). No gradient crosses a reset, and every method stays exact
        (examples/python/packed_episodes.py); a bidirectional rnn's backward direction
        restarts at each segment's end (gradients only: its evaluation under no_grad goes
        through PlainRNN, which refuses it).
        grad_scaler: None, or the torch.amp.GradScaler of a mixed-precision loop (float16
        under torch.autocast): the gradients come out multiplied by its scale, as
        scaler.scale(loss).backward() leaves them, so scaler.step(optimizer) and
        scaler.update() follow as usual. Without it, scaler.step() would divide unscaled
        gradients by the scale. grad_h is taken as given: the next call's h0.grad, already
        scaled.

        Returns loss, the scalar loss detached (its gradients are already in .grad: do not
        call loss.backward()); loss_seq, the per-step losses [B, T] (packed as x when x is
        packed; 0 past a sequence's end); h, the final state in the rnn's layout. Under
        torch.no_grad(), or when nothing requires grad, it computes the loss alone in one
        pass, as PlainRNN does."""
        spec = self.method_for(N, method)
        if not self._wants_gradients(x, h0):
            # Evaluation (torch.no_grad(), or nothing requires grad): the loss alone, in one
            # pass without a graph, as the original computes it there.
            with torch.no_grad():
                return super().forward(x, y, h0, resets)
        with autocast_cache_off(), interrupts_kept():
            return self._compute(spec, x, y, h0, grad_h, resets, grad_scaler)

    def _compute(self, spec, x, y, h0, grad_h=None, resets=None, grad_scaler=None):
        # Under DistributedDataParallel the engine runs the wrapped modules, and DDP
        # all-reduces once, after the last block (NOTE [ One all-reduce per iteration ]).
        data_parallel = DataParallel.of(self.rnn, self.out)
        reduction = reduction_of(self.loss_scaling)
        call = EngineCall(unwrapped(self.rnn), unwrapped(self.out), x, y, h0,
                          self.fast_cells, grad_h, resets)
        loss_scale = loss_scale_of(grad_scaler, call.batch.inputs.device)
        share = 1.0
        if data_parallel is not None:
            share = data_parallel.share(call.batch.batch_size, reduction,
                                        call.batch.inputs.device)
            # grad_h is in the global loss's units; the call's gradients are scaled by the
            # share below, so it goes in divided by it.
            if call.engine_grad_h is not None and share != 1.0:
                call.engine_grad_h = [g / share for g in call.engine_grad_h]
        if spec not in self._methods:
            self._methods[spec] = _C.make_method(spec)
        method = self._methods[spec]
        check_method_fits(method, call.model, unwrapped(self.rnn))
        if method.name != "full":  # one call on the whole sequence cuts nothing
            self._refuse_cut_dependence(call, spec)
            warn_if_thread_pools_fight(call.batch.inputs.device)
        with gradients_as_one_backward(call.grad_tensors):
            result = _C.compute(method, reduction=reduction,
                                **progress_args(spec, self.progress), **call.engine_args(),
                                final_state_grad=call.engine_grad_h, loss_scale=loss_scale)
            call.carry_gradients_back()
            if data_parallel is not None:
                data_parallel.scale_gradients(call.grad_tensors, share)
        if data_parallel is not None:
            with gradient_hooks_held(call.grad_tensors):  # they ran, once, above
                data_parallel.reduce()
        self.last_counters = result["counters"]
        loss_seq = from_time_major(result["step_losses"], call.batch)
        return result["loss"], loss_seq, call.final_state(result["final_state"])

    def _refuse_cut_dependence(self, call, spec):
        """ValueError when the modules compute something else cut into blocks: what the
        package recognises, then (once per training mode) check_cuts' measurement."""
        reasons = inexact_parts(self.rnn, self.out)
        if call.changed_buffers:
            reasons.append(
                f"{', '.join(call.changed_buffers)} changed when the modules ran: VLRNN runs "
                "them per block, and each block twice (once without gradients, once to "
                "back-propagate it), so a buffer updated per call (BatchNorm's running "
                "statistics, spectral_norm's power iteration, while training) ends up "
                "elsewhere than after one call, and what depends on it differs (put that part "
                "in eval() mode)")
        if reasons:
            raise ValueError(f"{spec}: refused, its gradient would not be exact: "
                             + "; ".join(reasons) + ". method='full' runs it as one call")
        # A packed batch is checked apart: only there do sequences leave the rnn's calls
        # (NOTE [ Sequences leave the rnn's calls ] in _engine.py).
        key = (self.rnn.training, self.out.training, call.batch.lengths is not None)
        if not self.check_cuts or key in self._cuts_checked:
            return
        found = cut_dependence(call)
        if found["diagnosis"]:
            raise ValueError(f"{spec}: refused, its gradient would not be exact: "
                             f"{found['diagnosis']} (VLRNN's first-call check, check_cuts; "
                             "vlrnn.verify shows the gradients' error). method='full' runs it "
                             "as one call")
        if found["warning"]:
            warn_caller(f"vlrnn: {found['warning']}", RuntimeWarning)
        self._cuts_checked.add(key)
