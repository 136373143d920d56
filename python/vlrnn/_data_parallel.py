"""VLRNN on modules wrapped in torch.distributed's DistributedDataParallel (DDP).

DDP all-reduces a module's gradients in the backward pass that follows each of its
forward calls. A block method calls the module and back-propagates once per block, so DDP
would all-reduce once per block (or fail: "Expected to mark a variable ready only once").

NOTE [ One all-reduce per iteration ]: the engine runs the wrapped modules themselves
(ddp.module), which DDP's hooks see as gradient accumulation (as under no_sync: a
backward after no DDP forward reduces nothing). Once every block is done, reduce() makes
one DDP call of a stand-in module, 0 · Σ parameters, and back-propagates it: that adds
zero to every .grad and fires DDP's hook on every parameter, so DDP's own reducer (its
buckets, its communication hook) all-reduces the complete gradients once. Each rank makes
one DDP call per iteration whatever its number of blocks, so ranks whose sequences, and
so block counts, differ never wait on a collective another rank does not make. The
reduction overlaps its buckets, not the blocks' backward: a block method's gradient is
complete only after its last block.

NOTE [ The loss of the global batch ]: DDP averages each rank's gradient over the ranks.
VLRNN's gradients are those of one process on the whole global batch: SUM, the sum of
every rank's sequences' losses; MEAN, the mean over every sequence of the global batch
(each averaged over its own valid steps), also when ranks hold different numbers of
sequences. So each rank scales its share before DDP averages: a wrapped parameter's
gradient by world_size · B_rank / B_global (MEAN) or world_size (SUM), and the gradients
no one all-reduces (x's, h0's) by B_rank / B_global (MEAN) or 1. B_global costs one
all-reduce of one number per MEAN iteration. The loss returned stays the rank's own.
"""
import contextlib

import torch

from ._compat import compiled_module_of


def _ddp_type():
    """torch's DistributedDataParallel, or None where torch has no torch.distributed."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel


def ddp_of(module):
    """The DistributedDataParallel that module is, or compiles (torch.compile(ddp): torch.
    _dynamo's OptimizedModule, holding it in _orig_mod); else None. NOTE [ DDP compiled
    whole ]: the engine runs DDP's module itself and makes DDP's one call per iteration
    (NOTE [ One all-reduce per iteration ]), so a compiled DDP is that DDP: the compile
    wrapper seen as the module instead let each block's backward all-reduce, with no
    share of the global batch taken, and an unwrapped head's gradients never reduced: a
    wrong gradient without a word. DDP's module runs uncompiled then;
    DDP(torch.compile(module)) keeps it compiled."""
    ddp = _ddp_type()
    if ddp is None:
        return None
    module = compiled_module_of(module) or module
    return module if isinstance(module, ddp) else None


def is_wrapped(module):
    """Whether module is wrapped in DistributedDataParallel (compiled or not)."""
    return ddp_of(module) is not None


def unwrapped(module):
    """The module DDP wraps (module itself when it is not wrapped)."""
    ddp = ddp_of(module)
    return module if ddp is None else ddp.module


def _trainable(module):
    return [p for p in module.parameters() if p.requires_grad]


class _ZeroOfParameters(torch.nn.Module):
    """Stands in for a wrapped module during DataParallel.reduce()'s one DDP call: 0 · Σ p
    over its parameters (held in a plain list, so DDP's own parameters stay the module's)."""

    def __init__(self, parameters):
        super().__init__()
        self.held = list(parameters)

    def forward(self):
        return sum(p.sum() for p in self.held) * 0


@contextlib.contextmanager
def _module_replaced(wrapper, stand_in):
    """DDP calls wrapper.module in its forward: the stand-in there for the body's call."""
    wrapped = wrapper._modules["module"]
    wrapper._modules["module"] = stand_in
    try:
        yield
    finally:
        wrapper._modules["module"] = wrapped


class DataParallel:
    """The DDP wrappers of a VLRNN's rnn and out: how a rank scales its gradients, and
    the one reduction per iteration (NOTE [ One all-reduce per iteration ])."""

    def __init__(self, rnn, out):
        pairs = [("rnn", rnn), ("out", out)]
        self.wrappers = [w for w in (ddp_of(m) for _, m in pairs) if w is not None]
        group = self.wrappers[0].process_group
        self.world_size = torch.distributed.get_world_size(group)
        self.group = group
        for name, module in pairs:
            if not is_wrapped(module) and _trainable(module):
                wrapped = [n for n, m in pairs if is_wrapped(m)][0]
                raise ValueError(
                    f"{name}: {wrapped} is wrapped in DistributedDataParallel but {name} is "
                    f"not, and {name} has parameters that require grad: no rank would "
                    f"all-reduce their gradients, and the ranks' copies would drift apart; "
                    f"wrap {name} in DistributedDataParallel too")
        sizes = {torch.distributed.get_world_size(w.process_group) for w in self.wrappers}
        if len(sizes) > 1:
            raise ValueError(f"rnn, out: wrapped in DistributedDataParallel over process "
                             f"groups of different sizes {sorted(sizes)}; use one group")
        self.parameter_ids = {id(p) for w in self.wrappers for p in _trainable(w.module)}

    @staticmethod
    def of(rnn, out):
        """A DataParallel when rnn or out is wrapped in DDP, else None."""
        return DataParallel(rnn, out) if is_wrapped(rnn) or is_wrapped(out) else None

    def share(self, local_batch, reduction, device):
        """This rank's share of the global loss: B_rank / B_global for MEAN (one all-reduce
        of one number), 1 for SUM (NOTE [ The loss of the global batch ])."""
        if reduction != "mean":
            return 1.0
        count = torch.tensor([float(local_batch)], dtype=torch.float64, device=device)
        torch.distributed.all_reduce(count, group=self.group)
        return local_batch / count.item()

    def scale_gradients(self, tensors, share):
        """Scales each tensor's .grad (this call's gradients alone) by the rank's share, and
        a wrapped parameter's by world_size too, DDP's averaging undone."""
        with torch.no_grad():
            for t in tensors:
                if t.grad is None:
                    continue
                scale = share * self.world_size if id(t) in self.parameter_ids else share
                if scale != 1.0:
                    t.grad.mul_(scale)

    def reduce(self):
        """One DDP call and backward per wrapper: DDP all-reduces the gradients in .grad
        (every block's), through its buckets and communication hook. Inside a wrapper's
        no_sync(), DDP reduces nothing, as it would for its own forward."""
        for wrapper in self.wrappers:
            parameters = _trainable(wrapper.module)
            if not parameters:
                continue
            with torch.enable_grad(), _module_replaced(wrapper,
                                                       _ZeroOfParameters(parameters)):
                zero = wrapper()
            zero.backward()
