"""A user's recurrent module and head, called the way the user calls them, for the engine.

The engine works time-major on the whole batch: it calls a block function with
(x [Tb, B, F], state tuple, lengths [B] or None) and a head function with
(z [Tb, B, Z], y [Tb, B, ...]) (NOTE [ Python modules in the engine ] in
python/src/python_modules.h). The functions here turn that into the module's own call:

- batch-first input: rnn(x [B, Tb, F], h) with h in the module's layout, every state tensor
  [layers, B, ...] (batch at dim 1, as torch.nn.LSTM's) -- a tensor, or a tuple as the
  module returned it;
- packed input: rnn(PackedSequence of the sequences still running, h of those sequences).
  Ended sequences never reach the module: their state is carried past it unchanged and
  their outputs are zero. The block's sequences keep the caller's order, and are packed in
  the order the caller's x was packed, so a module drawing per-call dropout over packed
  data draws it in the same order a whole-sequence call does;
- the head: out(z [B, Tb, Z], y [B, Tb, ...]) -> per-step loss [B, Tb] (zeros in z, and
  zero targets, past a sequence's end).

A module that speaks the engine's layout itself defines engine_block(), returning the
block function (x [Tb, B, F], state tuple with the batch at dim 1, lengths [B] or None) ->
(z [Tb, B, Z], state tuple); it then sees every sequence of the batch with its lengths, as
the C++ models do (vlrnn.ModelFile does: a model file draws its per-step dropout for the
whole batch, which a block of the still-running sequences would not reproduce).

A module whose function the engine can run as a C++ model defines engine_model(), returning
an EngineModel (below) or None: the engine then calls no Python per block, and the model's
own structure is visible to it. That is how a bidirectional model reaches the bidirectional
block method (vlrnn/core/bidirectional.h): no block of it can be run left to right, so it
cannot be handed over as a block function at all.

Shapes: Tb = steps in the block, B = batch, R = sequences still running in the block.
"""
from typing import Callable, NamedTuple

import torch
from torch.nn.utils.rnn import PackedSequence

from ._compat import add_note, autocast_dtype, parametrize_cache_per_call
from ._sequences import packed_lengths, packed_order, packed_rows, unpacked_rows

BATCH_DIM = 1  # of every state tensor: [layers, B, ...]


def _kind(value):
    return type(value).__name__


def as_state_tuple(h, what):
    """A module's state (a tensor, or a tuple / list of tensors) as a tuple of tensors."""
    if isinstance(h, torch.Tensor):
        return (h,)
    if isinstance(h, (tuple, list)) and h and all(isinstance(t, torch.Tensor) for t in h):
        return tuple(h)
    raise TypeError(f"{what}: expected a tensor or a tuple of tensors [layers, B, ...], "
                    f"got {_kind(h)}")


class StateLayout:
    """How the module holds its state: one tensor or a tuple, and each tensor's shape."""

    def __init__(self, state, batch, what):
        self.is_tuple = not isinstance(state, torch.Tensor)
        tensors = as_state_tuple(state, what)
        for i, t in enumerate(tensors):
            if t.dim() < 2 or t.shape[BATCH_DIM] != batch:
                raise ValueError(
                    f"{what}[{i}]: expected the batch ({batch} sequences) at dim 1, "
                    f"[layers, B, ...] as torch.nn.LSTM holds it, got shape {list(t.shape)}")
        self.shapes = [list(t.shape) for t in tensors]

    def shapes_for(self, batch):
        return [s[:BATCH_DIM] + [batch] + s[BATCH_DIM + 1:] for s in self.shapes]

    def to_module(self, tensors):
        return tuple(tensors) if self.is_tuple else tensors[0]

    def check(self, tensors, batch, what):
        expected = self.shapes_for(batch)
        if len(tensors) != len(expected):
            raise ValueError(f"{what}: expected a state of {len(expected)} tensor(s), got "
                             f"{len(tensors)}")
        for i, (t, shape) in enumerate(zip(tensors, expected)):
            if list(t.shape) != shape:
                raise ValueError(f"{what}[{i}]: expected shape {shape} (the module's state "
                                 f"layout, batch at dim 1), got {list(t.shape)}")


class EngineModel(NamedTuple):
    """A C++ model computing a module's function, and its state in both layouts."""
    model: object                 # a vlrnn._C.RecurrentModule (a Bidirectional among them)
    to_engine: Callable           # the module's state tuple -> the model's list of tensors
    from_engine: Callable         # and back


def stacked_directions(num_layers, num_states):
    """(to_engine, from_engine) between torch.nn's bidirectional state layout, a tuple of
    num_states tensors [2L, B, W] (row 2l + d: layer l, direction d = 0 forward, 1
    backward), and the engine Bidirectional's list (fwd_0..., bwd_0..., fwd_1..., ...) of
    [1, B, W] tensors (vlrnn/core/bidirectional.h)."""
    def to_engine(tensors):
        return [t[row:row + 1] for row in range(2 * num_layers) for t in tensors]

    def from_engine(tensors):
        return tuple(torch.cat(list(tensors[s::num_states])) for s in range(num_states))
    return to_engine, from_engine


def split_result(result, module_name):
    """(z, h) from what a module's forward returned: (z, h, extras...) as the original's."""
    if not isinstance(result, (tuple, list)) or len(result) < 2:
        raise TypeError(f"{module_name}.forward: expected it to return (z, h), got "
                        f"{_kind(result)}")
    return result[0], result[1]


def _grad_marks(parameters):
    """Which .grad each parameter holds, and its version: changed by a backward() call."""
    return [None if p.grad is None else (id(p.grad), p.grad._version) for p in parameters]


def call_user(function, args, watched, what, where, parameters):
    """function(*args): the user's module, called with what the package checks around it.
    - It must leave `watched` ((name, tensor) pairs: its inputs) as it got them: the engine
      calls a module again on the same block's tensors when it recomputes the block, and
      keeps the state it passed in as a checkpoint (ValueError otherwise).
    - It must not call backward() itself: the engine back-propagates, and a backward inside
      the call frees the block's graph or counts its gradient twice (ValueError when a
      parameter's .grad changed during the call).
    - It runs with parametrize.cached()'s cache to itself (parametrize_cache_per_call): a
      weight cached in one grad mode never reaches a call in the other.
    - An exception it raises reaches the caller unchanged, with a note saying where it was
      called (`where()`, made only then): its shapes are a block's, which the user never
      wrote down."""
    versions = [t._version for _, t in watched]
    grads = _grad_marks(parameters)
    try:
        with parametrize_cache_per_call():
            result = function(*args)
    except Exception as error:
        add_note(error, f"vlrnn: raised by {what} {where()}")
        raise
    if _grad_marks(parameters) != grads:
        raise ValueError(f"{what}: called backward() itself (a parameter's .grad changed during "
                         "the call); VLRNN computes the gradients: return the per-step loss and "
                         "let VLRNN back-propagate it")
    for (name, t), version in zip(watched, versions):
        if t._version != version:
            raise ValueError(f"{what}: changed its input {name} in place; the engine calls it "
                             "again on the same tensors when it recomputes a block, so it must "
                             "leave them as it got them (change a copy: t = t.clone())")
    return result


def block_place(steps, time_steps, shapes):
    """Where a callback ran, for a note on its error: `shapes` a dict of name -> tensor."""
    listed = ", ".join(f"{name} {list(t.shape)}" for name, t in shapes.items())
    return (f"on a block of {steps} of the sequence's {time_steps} steps ({listed}): VLRNN "
            "calls it block by block, so the shapes in the message are the block's")


class BlockFunction:
    """The engine's block function over the user's module (the module docstring)."""

    def __init__(self, rnn, layout, sort_order, packed, time_steps, parameters):
        self.rnn = rnn
        self.layout = layout
        self.sort_order = sort_order  # [B] longest first (the caller's packing order)
        self.packed = packed
        self.name = type(rnn).__name__
        self.time_steps = time_steps  # T of the whole batch, for notes on errors
        self.parameters = parameters  # the rnn's and the head's (call_user)
        # What this module was seen doing that verify names beside a failing row.
        self.observations = set()

    def __call__(self, x, state, lengths):
        if self.packed:
            return self._packed(x, state, lengths)
        z, h = self._call_rnn(x.transpose(0, 1), x.transpose(0, 1), x.shape[0], state)
        if not isinstance(z, torch.Tensor):
            raise TypeError(f"{self.name}.forward: expected z, a tensor [B, T, Z], got {_kind(z)}")
        batch, steps = x.shape[1], x.shape[0]
        if z.dim() != 3 or z.shape[0] != batch or z.shape[1] != steps:
            raise ValueError(f"{self.name}.forward: expected z of shape [B, T, Z] = "
                             f"[{batch}, {steps}, Z] (batch-first), got {list(z.shape)}")
        self._check_device(z, x, "z")
        return z.transpose(0, 1), self._checked_state(h, state)

    def _call_rnn(self, x, x_data, steps, state):
        """rnn(x, h) -> (z, h) through call_user; x_data the tensor x holds, steps its Tb."""
        watched = [("x", x_data)] + [(f"h[{i}]", t) for i, t in enumerate(state)]
        def where():
            return block_place(steps, self.time_steps, {"x": x_data})
        result = call_user(self.rnn, (x, self.layout.to_module(state)), watched,
                           f"{self.name}.forward", where, self.parameters)
        return split_result(result, self.name)

    def _check_device(self, z, x, what):
        if z.device != x.device:
            raise ValueError(f"{self.name}.forward: expected {what} on {x.device} (x's device), "
                             f"got {z.device}")

    def _checked_state(self, h, entry):
        """The returned state as a tuple, checked against the entry state it replaces: its
        layout, and each tensor's dtype and device (the engine carries it to the next block
        and seeds its gradient in the entry's dtype)."""
        what = f"{self.name}.forward's h"
        h = as_state_tuple(h, what)
        self.layout.check(h, entry[0].shape[BATCH_DIM], what)
        lower = autocast_dtype()  # under torch.autocast, torch.nn's RNNs return it
        for i, (got, want) in enumerate(zip(h, entry)):
            if (got.dtype != want.dtype and got.dtype != lower) or got.device != want.device:
                raise ValueError(f"{what}[{i}]: expected {want.dtype} on {want.device} (the "
                                 f"state it was given), got {got.dtype} on {got.device}")
        return h

    def _packed(self, x, state, lengths):
        steps, batch = x.shape[0], x.shape[1]
        if lengths is None:  # the engine's own measurements may run a block without lengths
            lengths = torch.full((batch,), steps, dtype=torch.int64)
        order = self.sort_order
        running = order[lengths[order] > 0]  # [R] longest first
        members = running.sort().values      # [R] the block's sequences, in the caller's order
        block_lengths = lengths[running]
        batch_sizes = (torch.arange(int(block_lengths[0])).unsqueeze(1)
                       < block_lengths.unsqueeze(0)).sum(1)
        rows, sequences = packed_rows(batch_sizes, running)
        device = x.device
        sorted_indices = torch.searchsorted(members, running)
        packed = PackedSequence(x[rows.to(device), sequences.to(device)], batch_sizes,
                                sorted_indices.to(device),
                                torch.argsort(sorted_indices).to(device))
        members_d = members.to(device)
        h_in = tuple(t.index_select(BATCH_DIM, members_d) for t in state)
        z, h = self._call_rnn(packed, packed.data, steps, h_in)
        if not isinstance(z, PackedSequence):
            raise TypeError(f"{self.name}.forward: given a PackedSequence, expected z as a "
                            f"PackedSequence, got {_kind(z)}")
        z_lengths = packed_lengths(z)  # [R] in z's own batch order: members' order
        if not torch.equal(z_lengths, lengths[members]):
            raise ValueError(f"{self.name}.forward: expected z with the lengths of its input, "
                             f"{lengths[members].tolist()} in the input's batch order, got "
                             f"{z_lengths.tolist()} (read through z's own sorted_indices)")
        self._check_device(z.data, x, "z")
        h = self._checked_state(h, h_in)
        # z is read through its own indices: a module that packs its output itself may order
        # sequences of equal length otherwise than its input was packed.
        if not torch.equal(packed_order(z), sorted_indices):
            self.observations.add(
                "the module's output PackedSequence is packed in another order than its input "
                "(sequences of equal length swapped); VLRNN reads it through the output's own "
                "sorted_indices")
        z_steps, z_sequences = unpacked_rows(z, members)
        z_full = z.data.new_zeros((steps, batch) + tuple(z.data.shape[1:]))
        z_full = z_full.index_put((z_steps.to(device), z_sequences.to(device)), z.data)
        exit_state = tuple(t.index_copy(BATCH_DIM, members_d, h_new)
                           for t, h_new in zip(state, h))
        return z_full, exit_state


class EngineLayoutBlock:
    """A module's own engine_block(), with what it returns checked."""

    def __init__(self, block, layout, name):
        self.block, self.layout, self.name = block, layout, name

    def __call__(self, x, state, lengths):
        with parametrize_cache_per_call():
            z, h = self.block(x, state, lengths)
        steps, batch = x.shape[0], x.shape[1]
        if not isinstance(z, torch.Tensor) or z.dim() != 3 or list(z.shape[:2]) != [steps, batch]:
            raise ValueError(f"{self.name}.engine_block: expected z of shape [T, B, Z] = "
                             f"[{steps}, {batch}, Z], got {getattr(z, 'shape', _kind(z))}")
        h = as_state_tuple(h, f"{self.name}.engine_block's h")
        self.layout.check(h, batch, f"{self.name}.engine_block's h")
        return z, h


class HeadFunction:
    """The engine's head function over the user's head (the module docstring)."""

    def __init__(self, out, time_steps, parameters):
        self.out = out
        self.name = type(out).__name__
        self.time_steps = time_steps  # T of the whole batch, for notes on errors
        self.parameters = parameters  # the rnn's and the head's (call_user)

    def __call__(self, z, y):
        z_first, y_first = z.transpose(0, 1), y.transpose(0, 1)  # [B, Tb, Z], [B, Tb, ...]
        def where():
            return block_place(z.shape[0], self.time_steps, {"z": z_first, "y": y_first})
        loss = call_user(self.out, (z_first, y_first), [("z", z), ("y", y)],
                         f"{self.name}.forward", where, self.parameters)
        if isinstance(loss, (tuple, list)) and loss:
            loss = loss[0]  # (loss, extras...) as the original allows
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"{self.name}.forward: expected the per-step loss, a tensor "
                            f"[B, T], got {_kind(loss)}")
        steps, batch = z.shape[0], z.shape[1]
        if list(loss.shape) != [batch, steps]:
            raise ValueError(f"{self.name}.forward: expected the per-step loss of shape [B, T] "
                             f"= [{batch}, {steps}], got {list(loss.shape)} (a block of "
                             f"{steps} of the sequence's {self.time_steps} steps)")
        if torch.is_grad_enabled() and z.requires_grad and not loss.requires_grad:
            raise ValueError(f"{self.name}.forward: returned a per-step loss that does not "
                             "depend on z (it has no grad_fn: detached, .item(), or computed "
                             "under torch.no_grad()); VLRNN back-propagates the loss itself")
        return loss.transpose(0, 1)
