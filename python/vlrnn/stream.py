"""A stream of unknown length: push its chunks as they come, get the exact gradient at the end.

Shapes: a chunk is x [B, n, F] (batch-first, as VLRNN's x) and y [B, n, ...]; the stream's T
is the sum of the chunks' n, known only at finish(). Every sequence runs the whole stream.
"""
import torch
from torch.nn.utils.rnn import PackedSequence

from . import _C
from ._compat import not_compiled
from ._engine import EngineCall, autocast_cache_off, check_module, cut_dependence, \
    gradients_as_one_backward, inexact_parts, interrupts_kept, loss_scale_of, reduction_of
from ._sequences import batch_from


def _count(value, name, at_least=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise ValueError(f"{name}: expected an integer >= {at_least}, got {value!r}")
    return value


class Stream:
    """Online checkpointing: exact BPTT over a stream whose length nobody knows in advance.

        stream = vlrnn.Stream(rnn, out, "MEAN", slots=8)
        for x, y in chunks:                  # x [B, n, F], y [B, n]: as they come
            stream.push(x, y)
        loss, loss_seq, h = stream.finish()  # the gradients are in .grad

    or, from any iterable of (x, y) chunks: loss, loss_seq, h = stream.run(chunks).

    push() runs the forward pass as the chunks come (one step behind the newest: only
    finish() says which step is the last) and holds at most `slots` states besides h0 (as
    revolve with as many slots), whatever the stream's length: which ones, Wang, Moin and
    Iaccarino's rule decides step by step, never knowing T. finish() back-propagates the
    stream, recomputing what it did not keep (revolve between the kept states), and returns
    what VLRNN's call returns: the gradients are those of PlainRNN's loss.backward() on the
    whole stream (to 1e-10 in float64). The chunks you push are kept (referenced) until
    finish(); a chunk's steps are copied only when the reversal needs steps of several
    chunks as one.

    rnn(x, h) -> (z, h) and out(z, y) -> loss [B, n] are as for VLRNN; a module whose
    output depends on where the sequence is cut is refused at the first push. With dropout,
    draw no random numbers of your own between pushes from the global generators (use a
    torch.Generator of your own): the stream replays the model's draws, and refuses to go on
    when the generators moved.
    """

    def __init__(self, rnn, out, loss_scaling="MEAN", slots=None, budget_bytes=None, h0=None,
                 fast_cells=True, check_cuts=True):
        """rnn, out: the recurrent module and the head, as for VLRNN. loss_scaling: 'SUM' or
        'MEAN' (over every step of the stream, then over the batch).

        slots: the states held at once besides h0 (default 4; revolve's slots); or
        budget_bytes instead: as many as states of the rnn's size fit in these bytes. Either
        is the whole memory the stream's states take, whatever its length; more slots
        recompute less.

        h0: None (the rnn's own initial state) or its state, as for VLRNN (its .grad gets
        dL/dh0 when it requires grad). fast_cells, check_cuts: as for VLRNN."""
        check_module(rnn, "rnn")
        check_module(out, "out")
        if isinstance(rnn, torch.nn.parallel.DistributedDataParallel) or \
                isinstance(out, torch.nn.parallel.DistributedDataParallel):
            raise ValueError("rnn, out: a stream does not run under DistributedDataParallel; "
                             "pass the modules themselves")
        self.reduction = reduction_of(loss_scaling)
        if slots is not None and budget_bytes is not None:
            raise ValueError(f"give slots or budget_bytes, not both (got slots={slots!r}, "
                             f"budget_bytes={budget_bytes!r})")
        self.slots_asked = 4 if slots is None else _count(slots, "slots")
        self.budget_bytes = 0 if budget_bytes is None else _count(budget_bytes, "budget_bytes")
        for name, value in (("fast_cells", fast_cells), ("check_cuts", check_cuts)):
            if not isinstance(value, bool):
                raise TypeError(f"{name}: expected True or False, got {value!r}")
        self.rnn, self.out, self.h0 = rnn, out, h0
        self.fast_cells, self.check_cuts = fast_cells, check_cuts
        self.last_counters = None  # steps run by finish(): forward, no-grad, backward
        self._call = None      # the first chunk's EngineCall: the modules as the engine's
        self._engine = None    # _C.OnlineStream
        self._leaves = []      # the pushed x and y that are leaves requiring grad
        self._finished = False

    @property
    def steps(self):
        """Steps pushed so far."""
        return 0 if self._engine is None else self._engine.steps

    @property
    def slots(self):
        """The slots the stream keeps states in (from budget_bytes: known at the first push)."""
        return self.slots_asked if self._engine is None else self._engine.slots

    @property
    def held_states(self):
        """States held now besides h0 (at most slots)."""
        return 0 if self._engine is None else self._engine.held_states

    @not_compiled
    def push(self, x, y):
        """Appends a chunk: x [B, n, F], y [B, n, ...], with the first chunk's B, F and dtype."""
        if self._finished:
            raise RuntimeError("push: the stream has finished; start a new vlrnn.Stream")
        if isinstance(x, PackedSequence) or isinstance(y, PackedSequence):
            raise TypeError("x, y: a stream's chunks are batch-first tensors [B, n, ...]; every "
                            "sequence runs the whole stream (no PackedSequence)")
        if self._call is None:
            batch = self._start(x, y)
            inputs, targets = self._call.engine_inputs, self._call.engine_targets
        else:
            batch = batch_from(x, y)
            first = self._call.batch.inputs  # [n, B, F]
            if batch.inputs.shape[1:] != first.shape[1:] or batch.inputs.dtype != first.dtype \
                    or batch.inputs.device != first.device:
                raise ValueError(f"x: expected [B, n, F] = [{first.shape[1]}, n, {first.shape[2]}] "
                                 f"{first.dtype} on {first.device} as the first chunk, got "
                                 f"{list(x.shape)} {x.dtype} on {x.device}")
            inputs = self._call.engine_leaf_for(batch.inputs)
            targets = self._call.engine_leaf_for(batch.targets)
        for t in (x, y):
            if t.is_leaf and t.requires_grad and all(t is not u for u in self._leaves):
                self._leaves.append(t)
        with autocast_cache_off(), interrupts_kept():
            self._engine.push(inputs, targets)

    @not_compiled
    def finish(self, grad_h=None, grad_scaler=None):
        """(loss, loss_seq, h) of the whole stream, its gradients accumulated into .grad.

        loss: the scalar loss, detached (do not call loss.backward()); loss_seq: the per-step
        losses [B, T]; h: the final state in the rnn's layout. grad_h: None, or dL/dh from a
        later consumer of the final state, in h's layout, back-propagated with the loss.
        grad_scaler: None, or a mixed-precision loop's torch.amp.GradScaler, as for
        VLRNN's call: the gradients come out multiplied by its scale, grad_h taken as given."""
        if self._finished:
            raise RuntimeError("finish: the stream has finished already; start a new vlrnn.Stream")
        if self._engine is None:
            raise ValueError("finish: no chunk was pushed; push at least one (x, y) first")
        call = self._call
        engine_grad_h = call._engine_grad_h(grad_h)
        loss_scale = loss_scale_of(grad_scaler, call.batch.inputs.device)
        self._finished = True
        tensors = call.grad_tensors + [t for t in self._leaves
                                       if all(t is not u for u in call.grad_tensors)]
        with gradients_as_one_backward(tensors), autocast_cache_off(), interrupts_kept():
            result = self._engine.finish(final_state_grad=engine_grad_h, loss_scale=loss_scale)
            call.carry_gradients_back()
        self.last_counters = result["counters"]
        return result["loss"], result["step_losses"].transpose(0, 1), \
            call.final_state(result["final_state"])

    @not_compiled
    def run(self, chunks, grad_h=None, grad_scaler=None):
        """Pushes every (x, y) of the iterable `chunks`, then finish(grad_h, grad_scaler)."""
        for index, chunk in enumerate(chunks):
            if not isinstance(chunk, (tuple, list)) or len(chunk) != 2:
                raise TypeError(f"chunks[{index}]: expected an (x, y) pair, got "
                                f"{type(chunk).__name__}")
            self.push(*chunk)
        return self.finish(grad_h, grad_scaler)

    def _start(self, x, y):
        """The first chunk: the modules probed on it, checked for cut dependence, and the
        engine's stream made."""
        call = EngineCall(self.rnn, self.out, x, y, self.h0, self.fast_cells)
        if isinstance(call.model, _C.Bidirectional):
            raise ValueError("rnn: a bidirectional rnn's output at a step depends on steps a "
                             "stream has not seen yet; stream a left-to-right rnn")
        self._refuse_cut_dependence(call)
        self._engine = _C.OnlineStream(model=call.model, head=call.head,
                                       reduction=self.reduction, slots=self.slots_asked,
                                       budget_bytes=self.budget_bytes, h0=call.engine_h0)
        self._call = call
        return call.batch

    def _refuse_cut_dependence(self, call):
        """ValueError when the modules compute something else run chunk by chunk and block
        by block, as VLRNN refuses them."""
        reasons = inexact_parts(self.rnn, self.out)
        if call.changed_buffers:
            reasons.append(f"{', '.join(call.changed_buffers)} changed when the modules ran "
                           "(a stream runs them step range by step range, some twice; put that "
                           "part in eval() mode)")
        if not reasons and self.check_cuts:
            found = cut_dependence(call)["diagnosis"]
            if found:
                reasons.append(found + " (the first push's check, check_cuts)")
        if reasons:
            raise ValueError("Stream: refused, its gradient would not be exact: "
                             + "; ".join(reasons))
