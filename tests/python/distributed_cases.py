"""Data-parallel cases: the ranks of a gloo group each train their slice of a global batch
under DistributedDataParallel; their gradients and losses must equal one process's on the
whole batch.

    results = run_ranks(CASES, world_size=2)   # spawns the ranks; {case name: [per rank]}
    want = reference(case)                     # one process, PlainRNN on the whole batch

Each rank runs every case twice (the second iteration sees DDP's rebuilt buckets) and keeps
the second: its loss, its share of the batch, every gradient after DDP's reduction, h0's
gradient, and how many buckets DDP's communication hook all-reduced (beside the count for
one plain DDP forward and loss.backward(), PlainRNN's, on the same modules).

Shapes: B = global batch, T = steps (the longest sequence), F = input features, H = hidden
units, D = targets per step.
"""
import contextlib
import datetime
import os
from typing import NamedTuple, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils.rnn import pack_padded_sequence

import vlrnn
from conftest import CPU_GRAD_SCALER

F, H, D = 3, 5, 2
DTYPE = torch.float64
TIMEOUT = datetime.timedelta(seconds=60)  # a rank that never joins fails the test, no hang


class Case(NamedTuple):
    name: str
    method: str
    loss_scaling: str
    lengths: Tuple[int, ...]  # every sequence of the global batch, in order
    split: Tuple[int, ...]    # sequences per rank, in order
    rnn: str = "lstm"         # 'lstm': a stock nn.LSTM (the cells); 'gru': a module called
    # The first iteration's gradients kept, not zeroed: '' (zeroed), 'synced', or 'no_sync'
    # (the first iteration inside DDP's no_sync()): either way .grad ends at twice one's.
    accumulate: str = ""
    grad_h: bool = False      # also dL/dh_T of a later consumer, in the global loss's units
    loss_scale: float = 1.0   # a GradScaler's scale (grad_scaler=): gradients of scale * loss
    compiled: bool = False    # torch.compile(DDP(module)): the DDP compiled whole (2.x)


class GRUModule(nn.Module):
    """A user's module (not a stock torch.nn one): the engine calls it once per block."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True)

    def forward(self, x, h):
        return self.gru(x, h)


class StepHead(nn.Module):
    """A linear layer and a squared error per step: loss [B, T]."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(H, D)

    def forward(self, z, y):
        return ((self.linear(z) - y) ** 2).sum(-1)


def _cases():
    cases = []
    fixed, variable = (9,) * 4, (12, 5, 9, 3)
    for method in ("vlrnn:block_length=3", "planner:percent=30", "checkpoint", "full"):
        for scaling in ("MEAN", "SUM"):
            for kind, lengths in (("fixed", fixed), ("variable", variable)):
                cases.append(Case(f"{method}-{scaling}-{kind}", method, scaling, lengths,
                                  (2, 2)))
    # Ranks of unequal batches: MEAN is the mean over the global batch's sequences.
    cases.append(Case("uneven-MEAN", "vlrnn:block_length=2", "MEAN", (4, 11, 7, 8, 6), (4, 1)))
    cases.append(Case("module-MEAN", "vlrnn:block_length=4", "MEAN", (12, 5, 9, 3), (2, 2), "gru"))
    for scaling in ("MEAN", "SUM"):
        cases.append(Case(f"grad_h-{scaling}", "vlrnn:block_length=3", scaling, (4, 11, 7, 8, 6),
                          (3, 2), grad_h=True))
    if CPU_GRAD_SCALER:
        # NOTE [ Loss scale ] with the ranks' shares of MEAN and a later consumer's grad_h.
        cases.append(Case("grad_scaler-MEAN", "vlrnn:block_length=3", "MEAN", (4, 11, 7, 8, 6),
                          (3, 2), grad_h=True, loss_scale=384.0))
    if hasattr(torch, "compile"):  # NOTE [ DDP compiled whole ] (_data_parallel.py)
        cases.append(Case("compiled-module-MEAN", "vlrnn:block_length=2", "MEAN",
                          (4, 11, 7, 8, 6), (3, 2), "gru", compiled=True))
    for accumulate in ("synced", "no_sync"):
        cases.append(Case(f"accumulate-{accumulate}", "vlrnn:block_length=4", "MEAN", (4, 11, 7, 8, 6),
                          (3, 2), accumulate=accumulate))
    return cases


CASES = _cases()


def build(case):
    """The case's rnn, head and global batch (x, y, h0), the same on every rank."""
    torch.manual_seed(1)
    rnn = (nn.LSTM(F, H, batch_first=True) if case.rnn == "lstm" else GRUModule()).to(DTYPE)
    out = StepHead().to(DTYPE)
    B, T = len(case.lengths), max(case.lengths)
    x = torch.randn(B, T, F, dtype=DTYPE)
    y = torch.randn(B, T, D, dtype=DTYPE)
    states = 2 if case.rnn == "lstm" else 1
    h0 = tuple(torch.randn(1, B, H, dtype=DTYPE) for _ in range(states))
    return rnn, out, x, y, h0


def grad_h_of(case, rows):
    """The case's dL/dh_T for the sequences `rows` (a tuple like the state), or None."""
    if not case.grad_h:
        return None
    g = torch.randn(1, len(case.lengths), H, dtype=DTYPE,
                    generator=torch.Generator().manual_seed(5))
    return (g[:, rows], 0.5 * g[:, rows])


def batch_of(case, x, y, h0, rows):
    """The sequences `rows` of the global batch as a call takes them: batch-first when
    every length is T, else packed; h0 a tuple of leaves that require grad."""
    lengths = torch.tensor([case.lengths[r] for r in rows])
    steps = int(lengths.max())
    x, y = x[rows, :steps], y[rows, :steps]
    h0 = tuple(h[:, rows].clone().requires_grad_() for h in h0)
    if len(set(case.lengths)) > 1:
        x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y = pack_padded_sequence(y, lengths, batch_first=True, enforce_sorted=False)
    return x, y, (h0 if len(h0) > 1 else h0[0]), h0


def gradients(rnn, out, h0_leaves):
    grads = {f"rnn.{n}": p.grad.clone() for n, p in rnn.named_parameters()}
    grads.update({f"out.{n}": p.grad.clone() for n, p in out.named_parameters()})
    grads.update({f"h0[{i}]": h.grad.clone() for i, h in enumerate(h0_leaves)})
    return grads


def reference(case):
    """One process on the whole batch: PlainRNN's loss and loss.backward()'s gradients."""
    rnn, out, x, y, h0 = build(case)
    x, y, h0_arg, h0_leaves = batch_of(case, x, y, h0, list(range(len(case.lengths))))
    rows = list(range(len(case.lengths)))
    loss, _, h = vlrnn.PlainRNN(rnn, out, case.loss_scaling)(x, y, h0_arg)
    seed = grad_h_of(case, rows)
    total = case.loss_scale * loss
    if seed is not None:  # taken as given, not scaled
        total = total + sum((a * b).sum() for a, b in zip(h, seed))
    total.backward()
    return {"loss": loss.item(), "grads": gradients(rnn, out, h0_leaves)}


def _counting_hook(state, bucket):
    state["all_reduces"] += 1
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    world = dist.get_world_size()
    return fut.then(lambda f: f.value()[0].div_(world))


def _rank_result(case, rank):
    rnn, out, x, y, h0 = build(case)
    first = sum(case.split[:rank])
    rows = list(range(first, first + case.split[rank]))
    state = {"all_reduces": 0}
    wrapped = []
    for module in (rnn, out):
        ddp = DistributedDataParallel(module)
        ddp.register_comm_hook(state, _counting_hook)
        wrapped.append(ddp)
    model = vlrnn.VLRNN(*[torch.compile(w) if case.compiled else w for w in wrapped],
                        case.loss_scaling, method=case.method)
    hooks = {"calls": 0}  # a gradient hook on every parameter: once per iteration each
    def count(gradient):
        hooks["calls"] += 1
    for p in list(rnn.parameters()) + list(out.parameters()):
        p.register_hook(count)
    for iteration in range(2):
        if not case.accumulate:
            for p in list(rnn.parameters()) + list(out.parameters()):
                p.grad = None
        state["all_reduces"] = hooks["calls"] = 0
        x_r, y_r, h0_arg, h0_leaves = batch_of(case, x, y, h0, rows)
        with contextlib.ExitStack() as stack:
            if case.accumulate == "no_sync" and iteration == 0:
                for ddp in wrapped:
                    stack.enter_context(ddp.no_sync())
            scaler = None if case.loss_scale == 1.0 else \
                torch.amp.GradScaler("cpu", init_scale=case.loss_scale)
            loss = model(x_r, y_r, h0_arg, grad_h=grad_h_of(case, rows), grad_scaler=scaler)[0]
    result = {"loss": loss.item(), "rows": rows, "all_reduces": state["all_reduces"],
              "counters": model.last_counters, "grads": gradients(rnn, out, h0_leaves),
              "hook_calls": hooks["calls"]}
    state["all_reduces"] = hooks["calls"] = 0  # one plain DDP iteration: DDP's own counts
    x_r, y_r, h0_arg, _ = batch_of(case, x, y, h0, rows)
    vlrnn.PlainRNN(*wrapped, case.loss_scaling)(x_r, y_r, h0_arg)[0].backward()
    result["plain_all_reduces"] = state["all_reduces"]
    result["plain_hook_calls"] = hooks["calls"]
    return result


def _worker(rank, world_size, rendezvous, out_dir, cases):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world_size, timeout=TIMEOUT)
    try:
        results = {case.name: _rank_result(case, rank) for case in cases}
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ranks(cases, world_size, work_dir):
    """Runs every case on world_size gloo ranks (processes); [each rank's {name: result}]."""
    rendezvous = os.path.join(work_dir, "rendezvous")
    torch.multiprocessing.spawn(_worker, args=(world_size, rendezvous, work_dir, cases),
                                nprocs=world_size, join=True)
    return [torch.load(os.path.join(work_dir, f"rank{r}.pt")) for r in range(world_size)]
