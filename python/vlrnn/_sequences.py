"""The caller's batch (batch-first tensors or PackedSequences) as the engine's time-major one.

Shapes: T = steps (the longest sequence), B = batch, F = input features, N = valid steps of
all sequences together (a PackedSequence's data rows).
"""
from typing import NamedTuple, Optional

import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence


class Batch(NamedTuple):
    inputs: torch.Tensor             # [T, B, F], a view of the caller's x where it can be
    targets: torch.Tensor            # [T, B, ...]
    lengths: Optional[torch.Tensor]  # [B] int64 on the CPU; None: every sequence has T steps
    packed: Optional[PackedSequence]  # the caller's x when it was packed (its sort order)

    @property
    def time_steps(self):
        return self.inputs.shape[0]

    @property
    def batch_size(self):
        return self.inputs.shape[1]

    def sort_order(self):
        """[B] sequences by length, longest first, in the order the caller's x was packed."""
        if self.packed is not None:
            return packed_order(self.packed)
        return torch.arange(self.batch_size)


def _kind(value):
    return type(value).__name__


def outside_inference_mode(tensor):
    """tensor, or where it is an inference tensor (made under torch.inference_mode()) and
    the call runs outside that mode, a normal copy of it. Autograd neither saves an
    inference tensor for backward nor counts its versions, and a block method needs both of
    what it hands the modules (a block recomputed from it, checked for in-place changes);
    only the engine's own cells never hand it over, so only their path took one before.
    (A PackedSequence needs none: pad_packed_sequence, outside the mode, returns normal
    tensors.)"""
    if tensor.is_inference() and not torch.is_inference_mode_enabled():
        return tensor.clone()
    return tensor


def batch_from(x, y, x_name="x", y_name="y"):
    """The engine's batch from (x, y); TypeError / ValueError naming the argument."""
    if isinstance(x, PackedSequence):
        if not isinstance(y, PackedSequence):
            raise TypeError(f"{y_name}: expected a PackedSequence like {x_name}, got {_kind(y)}")
        inputs, lengths = pad_packed_sequence(x)  # [T, B, F], lengths [B] in the caller's order
        targets, target_lengths = pad_packed_sequence(y)
        if not torch.equal(lengths, target_lengths):
            raise ValueError(f"{y_name}: expected the lengths of {x_name} {lengths.tolist()}, "
                             f"got {target_lengths.tolist()}")
        if inputs.dim() != 3:
            raise ValueError(f"{x_name}: expected a PackedSequence of [len, F] sequences, got "
                             f"data of shape {list(x.data.shape)}")
        check_on_device_of(targets, inputs, y_name, x_name)
        return Batch(inputs, targets, lengths.to(torch.int64), x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{x_name}: expected a batch-first tensor [B, T, F] or a "
                        f"PackedSequence, got {_kind(x)}")
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"{y_name}: expected a tensor [B, T, ...] like {x_name}, got {_kind(y)}")
    if x.dim() != 3:
        raise ValueError(f"{x_name}: expected a batch-first tensor [B, T, F] (rank 3), got "
                         f"shape {list(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{x_name}: expected a floating-point tensor, got {x.dtype}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{x_name}: expected at least one sequence and one step, got shape "
                         f"{list(x.shape)}")
    if y.dim() < 2 or y.shape[:2] != x.shape[:2]:
        raise ValueError(f"{y_name}: expected leading dimensions [B, T] = {list(x.shape[:2])} "
                         f"as {x_name}, got shape {list(y.shape)}")
    check_on_device_of(y, x, y_name, x_name)
    x, y = outside_inference_mode(x), outside_inference_mode(y)
    return Batch(x.transpose(0, 1), y.transpose(0, 1), None, None)


def check_on_device_of(tensor, x, what, x_name="x"):
    """ValueError naming `what` unless `tensor` is on x's device: the engine moves nothing."""
    if tensor.device != x.device:
        raise ValueError(f"{what}: expected {x_name}'s device {x.device}, got {tensor.device}")


def resets_from(resets, batch, name="resets"):
    """The engine's [T, B] bool mask of segment starts (NOTE [ Resets ]: a sequence restarts
    from its initial state there), on the CPU, from what a caller gives, or None:
    - a bool tensor [B, T], batch-first like x (for a packed x, T is the longest sequence
      and the sequences are in the caller's order), true where a new segment starts;
    - segment starts in the style of cu_seqlens, offsets into each sequence's stream: a list
      of B 1-D integer tensors (or lists), or one 1-D tensor when B = 1 (values in [0, T]).
    Starts at step 0 or past a sequence's end change nothing and are dropped.
    TypeError / ValueError naming the argument."""
    if resets is None:
        return None
    steps, size = batch.time_steps, batch.batch_size
    if isinstance(resets, torch.Tensor) and resets.dtype == torch.bool:
        if list(resets.shape) != [size, steps]:
            raise ValueError(f"{name}: expected a bool mask [B, T] = [{size}, {steps}] "
                             f"(batch-first, like x), got shape {list(resets.shape)}")
        mask = resets.detach().to("cpu").t().clone()  # [T, B]
    else:
        if isinstance(resets, torch.Tensor):
            if resets.dim() != 1 or resets.is_floating_point():
                raise TypeError(f"{name}: expected a bool mask [B, T] or integer segment "
                                f"starts, got a {resets.dtype} tensor of shape "
                                f"{list(resets.shape)}")
            if size != 1:
                raise ValueError(f"{name}: one tensor of segment starts is for a batch of "
                                 f"one sequence; for B = {size}, give a list of {size} (one "
                                 "per sequence) or a bool mask [B, T]")
            resets = [resets]
        if not isinstance(resets, (list, tuple)):
            raise TypeError(f"{name}: expected None, a bool mask [B, T], or segment starts "
                            f"(a list of B integer tensors), got {_kind(resets)}")
        if len(resets) != size:
            raise ValueError(f"{name}: expected segment starts for each of the {size} "
                             f"sequences, got {len(resets)} lists")
        mask = torch.zeros(steps, size, dtype=torch.bool)
        for b, starts in enumerate(resets):
            starts = torch.as_tensor(starts).to("cpu")
            if starts.dim() != 1 or starts.is_floating_point() or starts.dtype == torch.bool:
                raise TypeError(f"{name}[{b}]: expected 1-D integer segment starts, got "
                                f"{starts.dtype} of shape {list(starts.shape)}")
            if starts.numel() and (starts.min() < 0 or starts.max() > steps):
                raise ValueError(f"{name}[{b}]: expected segment starts in [0, T = {steps}], "
                                 f"got values in [{int(starts.min())}, {int(starts.max())}]")
            starts = starts[starts < steps].long()
            mask[starts, b] = True
    mask[0] = False  # every sequence starts from its initial state anyway
    if batch.lengths is not None:
        mask &= torch.arange(steps).unsqueeze(1) < batch.lengths.unsqueeze(0)
    return mask if bool(mask.any()) else None


def packed_rows(batch_sizes, order):
    """For packed data with `batch_sizes` [T'] whose step t holds order[0 .. batch_sizes[t]):
    each row's step and sequence ([N] each), so data = padded[step, sequence]."""
    steps = torch.repeat_interleave(torch.arange(len(batch_sizes)), batch_sizes)
    starts = torch.cumsum(batch_sizes, 0) - batch_sizes
    rank = torch.arange(len(steps)) - torch.repeat_interleave(starts, batch_sizes)
    return steps, order[rank]


def packed_order(packed):
    """[B'] the packed batch's elements, longest first, as its own sorted_indices say (the
    identity when it was packed sorted), on the CPU."""
    if packed.sorted_indices is None:
        return torch.arange(int(packed.batch_sizes[0]))
    return packed.sorted_indices.cpu()


def unpacked_rows(packed, members):
    """Where each data row of a PackedSequence belongs, read through its own indices:
    (steps [N], sequences [N]) with data = padded[steps, sequences], where the packed
    batch's element i is the sequence members[i]. A PackedSequence's data means nothing
    without its sorted_indices: two packings of one batch may order sequences of equal
    length differently."""
    return packed_rows(packed.batch_sizes, members[packed_order(packed)])


def packed_lengths(packed):
    """[B'] each element's length, in the packed batch's own (unsorted) order."""
    sizes = packed.batch_sizes
    by_rank = (sizes.unsqueeze(1) > torch.arange(int(sizes[0])).unsqueeze(0)).sum(0)
    lengths = torch.empty_like(by_rank)
    lengths[packed_order(packed)] = by_rank
    return lengths


def pack_like(padded, like):
    """padded [T, B, ...] (time-major, the caller's sequence order) packed as `like` is."""
    steps, sequences = packed_rows(like.batch_sizes, packed_order(like))
    data = padded[steps.to(padded.device), sequences.to(padded.device)]
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)


def from_time_major(padded, batch):
    """Per-step results [T, B, ...] in the caller's form: batch-first [B, T, ...], or packed
    as the caller's x."""
    if batch.packed is not None:
        return pack_like(padded, batch.packed)
    return padded.transpose(0, 1)


def check_like_parameters(tensor, like, what):
    """ValueError naming `what` unless `tensor` has the dtype and device of `like`, a
    module's parameter: a module computes in its parameters' dtype, where they are."""
    if (tensor.dtype, tensor.device) != (like.dtype, like.device):
        raise ValueError(f"{what}: expected dtype {like.dtype} on {like.device} (the "
                         f"parameters'), got {tensor.dtype} on {tensor.device}")


def rnn_input(input, module, module_name):
    """A torch.nn-style RNN module's input (a tensor [T, B, F], [B, T, F] when
    module.batch_first, or a PackedSequence) as (x [T, B, F], lengths [B] or None), checked
    against the module (input_size, its parameters' dtype and device); TypeError /
    ValueError naming the argument."""
    batch_first, input_size = module.batch_first, module.input_size
    if isinstance(input, PackedSequence):
        x, lengths = pad_packed_sequence(input)  # [T, B, F], the caller's order
    elif isinstance(input, torch.Tensor):
        if input.dim() != 3:
            raise ValueError(f"{module_name} input: expected a tensor of rank 3 "
                             f"({'[B, T, F]' if batch_first else '[T, B, F]'}), got "
                             f"shape {list(input.shape)}")
        x, lengths = (input.transpose(0, 1) if batch_first else input), None
    else:
        raise TypeError(f"{module_name} input: expected a tensor or a PackedSequence, got "
                        f"{_kind(input)}")
    if x.shape[-1] != input_size:
        raise ValueError(f"{module_name} input: expected {input_size} features per step, "
                         f"got {x.shape[-1]}")
    check_like_parameters(x, next(module.parameters(), x), f"{module_name} input")
    return x, lengths


def rnn_output(z, input, batch_first):
    """z [T, B, ...] in the form of the RNN's input: packed as it, or batch-first."""
    if isinstance(input, PackedSequence):
        return pack_like(z, input)
    return z.transpose(0, 1) if batch_first else z
