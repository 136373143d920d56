"""Random cases for differential testing of the Python path: a user's modules run by VLRNN's
engine (called back once per block through vlrnn/_adapters.py) against full BPTT in PyTorch.

    case = case_from_seed(seed)        # one case, rebuilt from its own seed alone
    seeds = case_seeds(run_seed, n)    # a run's cases: the first k are the same for any n >= k
    results = check_case(case)         # [MethodResult], one per method of the case

A case is a user rnn module, a head, a batch, h0, loss_scaling, fast_cells and a few gradient
methods, drawn from parts (RNN_KINDS, HEADS, LENGTH_PATTERNS, the method pools). Each method's
loss, per-step losses, final state and every gradient (the parameters of rnn and out, h0 and x
when they require grad) are compared with vlrnn.PlainRNN's on the same weights, data and
generator state, relative to each tensor's largest entry, within TOLERANCE (float64).

Used by tests/python/test_random_cases.py (a fixed seed, under ctest) and
scripts/verify_python_random.py (the long run, into a result folder).

Shapes: B = batch, T = steps (the longest sequence), F = input features, H = hidden units,
Z = the rnn's output features, C = classes, D = regression targets, L = layers.
"""
import random
import warnings
from typing import Callable, List, NamedTuple, Optional

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pack_sequence, \
    pad_packed_sequence

import vlrnn
from conftest import GRU, LSTM, Composite, MlpHead, max_rel_diff

DTYPE = torch.float64
TOLERANCE = 1e-10
PAD = 0  # the target PaddingAwareHead ignores: the engine gives zero targets past an end
TORCH_RNNS = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}
CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}


class RNN(nn.RNN, vlrnn.RNNModule):
    pass


SUBCLASSED = {"gru": GRU, "lstm": LSTM, "rnn": RNN}  # forward is torch.nn's own


# ---------------------------------------------------------------------------- rnn modules

class Wrapped(nn.Module):
    """A torch.nn RNN called from a forward of its own: the engine calls it per block (the
    hand-written cells replace only an unmodified torch.nn.LSTM / GRU)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, h):
        return self.inner(x, h)


class CellLoop(nn.Module):
    """A GRUCell / LSTMCell / RNNCell loop over steps. Given a PackedSequence it unpacks it and
    packs its output itself (enforce_sorted=False): sequences of equal length may come out in
    another order than they went in, which only the output's sorted_indices record. Dropout on
    the input is drawn where every cut of the sequence draws the same masks: on the packed
    input's rows (time-major, in the caller's packing order, as the engine packs a block), or
    batch-first one step at a time."""

    def __init__(self, kind, n_in, n_hidden, dropout):
        super().__init__()
        self.kind, self.n_hidden = kind, n_hidden
        self.cell = CELLS[kind](n_in, n_hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, h):
        packed = isinstance(x, PackedSequence)
        if packed:
            x = PackedSequence(self.drop(x.data), x.batch_sizes, x.sorted_indices,
                               x.unsorted_indices)
            padded, lengths = pad_packed_sequence(x, batch_first=True)  # [B, T, F]
        else:
            padded, lengths = x, None
        batch, steps = padded.shape[0], padded.shape[1]
        states = 2 if self.kind == "lstm" else 1
        if h is None:
            state = [padded.new_zeros(batch, self.n_hidden) for _ in range(states)]
        else:
            state = [t[0] for t in ((h,) if isinstance(h, torch.Tensor) else h)]  # [B, H] each
        outputs = []
        for t in range(steps):
            step = padded[:, t] if packed else self.drop(padded[:, t])
            new = self.cell(step, tuple(state) if states == 2 else state[0])
            new = list(new) if states == 2 else [new]
            if lengths is not None:  # an ended sequence keeps its state
                running = (t < lengths).to(padded.dtype).unsqueeze(1)  # [B, 1]
                new = [running * n + (1 - running) * s for n, s in zip(new, state)]
            state = new
            outputs.append(state[0])
        z = torch.stack(outputs, 1)  # [B, T, H]
        if packed:
            z = pack_padded_sequence(z, lengths, batch_first=True, enforce_sorted=False)
        h = tuple(s.unsqueeze(0) for s in state)  # [1, B, H] each
        return z, h if states == 2 else h[0]


def _transposed(t):
    """t's values laid out with its last two dimensions swapped: a non-contiguous tensor."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


class NonContiguous(nn.Module):
    """Returns what its inner module returns, every tensor (z or z.data, each state tensor)
    non-contiguous: the engine must not assume the layout of what a module returns."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, h):
        z, h = self.inner(x, h)[:2]
        if isinstance(z, PackedSequence):
            z = PackedSequence(_transposed(z.data), z.batch_sizes, z.sorted_indices,
                               z.unsorted_indices)
        else:
            z = _transposed(z)
        h = _transposed(h) if isinstance(h, torch.Tensor) else tuple(map(_transposed, h))
        return z, h


class NestedState(nn.Module):
    """A GRU and an LSTM side by side whose state nests: (h_gru, (h_lstm, c_lstm))."""

    def __init__(self, n_in, n_hidden):
        super().__init__()
        self.gru = nn.GRU(n_in, n_hidden, batch_first=True)
        self.lstm = nn.LSTM(n_in, n_hidden, batch_first=True)

    def forward(self, x, h):
        a, h_gru = self.gru(x, None if h is None else h[0])
        b, h_lstm = self.lstm(x, None if h is None else h[1])
        return torch.cat([a, b], -1), (h_gru, h_lstm)


class Rnn(NamedTuple):
    module: nn.Module
    name: str          # the case's description of it
    z_size: int
    bidirectional: bool


def draw_rnn(rng, n_in, n_hidden):
    """One of RNN_KINDS, with its own sizes and options."""
    kind = rng.choice(RNN_KINDS)
    cell = rng.choice(["gru", "lstm", "rnn"])
    layers = rng.choice([1, 1, 2])
    if kind in ("torch", "subclassed", "wrapped", "noncontiguous"):
        make = TORCH_RNNS[cell] if kind != "subclassed" else SUBCLASSED[cell]
        eval_dropout = layers > 1 and rng.random() < 0.3  # dropout off in eval mode: exact
        module = make(n_in, n_hidden, num_layers=layers, batch_first=True,
                      dropout=0.4 if eval_dropout else 0.0)
        name = f"{cell}x{layers}" + (",dropout=0.4,eval" if eval_dropout else "")
        if eval_dropout:
            module.eval()
        if kind == "wrapped":
            module = Wrapped(module)
        if kind == "noncontiguous":
            module = NonContiguous(module)
        return Rnn(module, f"{kind}:{name}", n_hidden, False)
    if kind == "cell_loop":
        dropout = rng.choice([0.0, 0.3])
        return Rnn(CellLoop(cell, n_in, n_hidden, dropout),
                   f"cell_loop:{cell},dropout={dropout}", n_hidden, False)
    if kind == "composite":  # GRU -> 3-layer LSTM; vlrnn.nn's draws its dropout per step
        nn_module = rng.choice([nn, vlrnn.nn])
        dropout = 0.3 if nn_module is vlrnn.nn and rng.random() < 0.6 else 0.0
        return Rnn(Composite(n_in, n_hidden, dropout, nn_module),
                   f"composite:{nn_module.__name__},dropout={dropout}", n_hidden, False)
    if kind == "vlrnn_nn":  # dropout between layers drawn per step: exact under any cut
        cell = rng.choice(["gru", "lstm"])
        make = {"gru": vlrnn.nn.GRU, "lstm": vlrnn.nn.LSTM}[cell]
        layers = rng.choice([2, 3])
        module = make(n_in, n_hidden, num_layers=layers, batch_first=True, dropout=0.3)
        return Rnn(module, f"vlrnn_nn:{cell}x{layers},dropout=0.3", n_hidden, False)
    # bidirectional: torch.nn's without dropout (its masks are drawn per call), vlrnn.nn's
    # with or without
    cell = rng.choice(["gru", "lstm"])
    source = rng.choice([nn, vlrnn.nn])
    dropout = 0.3 if source is vlrnn.nn and layers > 1 and rng.random() < 0.6 else 0.0
    module = getattr(source, cell.upper())(n_in, n_hidden, num_layers=layers, batch_first=True,
                                           dropout=dropout, bidirectional=True)
    return Rnn(module, f"bidirectional:{source.__name__}.{cell}x{layers},dropout={dropout}",
               2 * n_hidden, True)


RNN_KINDS = ["torch", "subclassed", "wrapped", "noncontiguous", "cell_loop", "cell_loop",
             "composite", "vlrnn_nn", "bidirectional"]


# ---------------------------------------------------------------------------------- heads

class LinearCrossEntropy(nn.Module):
    def __init__(self, n_in, classes):
        super().__init__()
        self.linear = nn.Linear(n_in, classes)

    def forward(self, z, y):  # z [B, T, Z], y [B, T] -> [B, T]
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


class PaddingAwareHead(LinearCrossEntropy):
    """Cross-entropy that skips steps whose target is PAD, within a sequence and past its end
    (where the engine gives zero targets, as pad_packed_sequence pads)."""

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, ignore_index=PAD,
                                           reduction="none")


class Regression(nn.Module):
    def __init__(self, n_in, targets):
        super().__init__()
        self.linear = nn.Linear(n_in, targets)

    def forward(self, z, y):  # z [B, T, Z], y [B, T, D] -> [B, T]
        return (self.linear(z) - y).pow(2).sum(-1)


class Head(NamedTuple):
    make: Callable     # (Z, C or D) -> the head module
    targets: str       # "classes" (int [len]) or "values" (float [len, D])


HEADS = {
    "linear_ce": Head(LinearCrossEntropy, "classes"),
    "mlp": Head(MlpHead, "classes"),
    "mse": Head(Regression, "values"),
    "padding_aware": Head(PaddingAwareHead, "classes"),
}


# -------------------------------------------------------------------------------- batches

def draw_lengths(rng, pattern, batch, steps):
    if pattern == "ties":
        values = rng.sample(range(1, steps + 1), min(2, steps))
        return [steps] + [rng.choice(values) for _ in range(batch - 1)]
    if pattern == "ones":
        return [steps] + [rng.choice([1, 1, rng.randint(1, steps)]) for _ in range(batch - 1)]
    if pattern in ("equal", "single"):
        return [steps] * batch
    return [rng.randint(1, steps) for _ in range(batch)]  # "random", "sorted"


LENGTH_PATTERNS = ["ties", "ties", "ones", "equal", "random", "sorted", "single"]


def draw_batch(rng, g, head, n_in, classes, packed, pattern, steps, batch, x_grad):
    """(x, y, lengths or None): batch-first tensors [B, T, F] / [B, T, ...] (pattern "fixed",
    or "transposed": x a non-contiguous leaf), or PackedSequences of LENGTH_PATTERNS' lengths
    (enforce_sorted=False; "sorted" packs them sorted, without indices)."""
    def targets(n):
        if head.targets == "values":
            return torch.randn(n, classes, dtype=DTYPE, generator=g)
        return torch.randint(0, classes, (n,), generator=g)
    if not packed:
        x = torch.randn(batch, steps, n_in, dtype=DTYPE, generator=g)
        if pattern == "transposed":  # a non-contiguous leaf: x laid out time-major
            x = x.transpose(0, 1).contiguous().transpose(0, 1)
        return x.requires_grad_(x_grad), torch.stack([targets(steps) for _ in range(batch)]), \
            None
    lengths = draw_lengths(rng, pattern, batch, steps)
    if pattern == "sorted":
        lengths.sort(reverse=True)
    x = pack_sequence([torch.randn(n, n_in, dtype=DTYPE, generator=g) for n in lengths],
                      enforce_sorted=pattern == "sorted")
    # x.data made a leaf: the gradient the engine and PlainRNN give the caller's data
    x = PackedSequence(x.data.detach().requires_grad_(x_grad), x.batch_sizes, x.sorted_indices,
                       x.unsorted_indices)
    y = pack_sequence([targets(n) for n in lengths], enforce_sorted=pattern == "sorted")
    return x, y, lengths


def state_like(rnn, x, g, requires_grad, transposed):
    """A random h0 in the module's own layout, learned from what it returns given h = None
    (the generators left as they were); transposed: each tensor a non-contiguous leaf."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        h = rnn(x, None)[1]

    def like(t):
        value = torch.randn(t.shape, dtype=DTYPE, generator=g)
        return (_transposed(value) if transposed else value).requires_grad_(requires_grad)
    return like(h) if isinstance(h, torch.Tensor) else tuple(like(t) for t in h)


# -------------------------------------------------------------------------------- methods

class Method(NamedTuple):
    label: str        # as a record and the rerun name it
    init: dict        # VLRNN(...)'s keyword arguments (N=)
    call: dict        # the call's (N=, method=)


def method_pool(steps, bidirectional):
    """Every method spec a case may draw: block counts of every size class, VLRNN(N=) and
    the call's N=, checkpointing, revolve and the planner (left to right), or the methods a
    bidirectional rnn runs."""
    base = "bivlrnn" if bidirectional else "vlrnn"
    specs = [f"{base}:num_blocks={n}" for n in sorted({1, 2, 3, 7, steps})] + ["checkpoint"]
    specs += ["full"] if bidirectional else ["revolve", "revolve:slots=2", "planner:percent=20"]
    pool = [Method(s, {}, {"method": s}) for s in specs]
    pool += [Method(f"VLRNN(N={n})", {"N": n}, {}) for n in (2, 3)]
    pool += [Method(f"call N={n}", {}, {"N": n}) for n in (2, 5)]
    return pool


# ---------------------------------------------------------------------------------- cases

class Case(NamedTuple):
    seed: int
    description: str   # one line: with the seed, reproduces the case
    parts: dict        # what was drawn, by name (rnn, head, x, ...), as in the description
    rnn: nn.Module
    out: nn.Module
    x: object          # [B, T, F] or a PackedSequence
    y: object
    h0: object         # None, a tensor or a tuple of tensors [L, B, ...]
    loss_scaling: str
    fast_cells: bool
    methods: List[Method]


def case_seeds(run_seed, count):
    rng = random.Random(run_seed)
    return [rng.randrange(2 ** 40) for _ in range(count)]


def case_from_seed(seed):
    """The case of `seed`: every choice drawn from random.Random(seed), every tensor from a
    torch.Generator seeded with it, the modules' weights after torch.manual_seed(seed)."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n_in, n_hidden, classes = rng.randint(1, 4), rng.randint(2, 5), rng.randint(2, 4)
    packed = rng.random() < 0.6
    pattern = rng.choice(LENGTH_PATTERNS) if packed else rng.choice(["fixed", "transposed"])
    steps = rng.randint(1, 16)
    batch = 1 if pattern == "single" else rng.randint(1, 5)
    rnn = draw_rnn(rng, n_in, n_hidden)
    head_name = rng.choice(sorted(HEADS))
    head = HEADS[head_name]
    out = head.make(rnn.z_size, classes)
    rnn_module, out = rnn.module.to(DTYPE), out.to(DTYPE)
    x_grad = rng.random() < 0.4
    x, y, lengths = draw_batch(rng, g, head, n_in, classes, packed, pattern, steps, batch,
                               x_grad)
    h0_kind = rng.choice(["none", "given", "grad"])
    h0_transposed = rng.random() < 0.3
    h0 = None if h0_kind == "none" else \
        state_like(rnn_module, x, g, h0_kind == "grad", h0_transposed)
    h0_kind += ",transposed" if h0 is not None and h0_transposed else ""
    loss_scaling = rng.choice(["SUM", "MEAN"])
    fast_cells = True if rnn.bidirectional else rng.random() < 0.5
    methods = rng.sample(method_pool(steps, rnn.bidirectional), 3)
    parts = dict(rnn=rnn.name, head=head_name,
                 x=f"packed:{pattern} lengths={lengths}" if packed else
                 f"{pattern} B={batch} T={steps}",
                 F=n_in, H=n_hidden, h0=h0_kind, x_grad=x_grad, loss_scaling=loss_scaling,
                 fast_cells=fast_cells)
    description = (f"seed={seed} rnn={rnn.name} head={head_name} {parts['x']} F={n_in} "
                   f"H={n_hidden} h0={h0_kind} x_grad={x_grad} {loss_scaling} "
                   f"fast_cells={fast_cells} methods={[m.label for m in methods]}")
    return Case(seed, description, parts, rnn_module, out, x, y, h0, loss_scaling, fast_cells,
                methods)


# ----------------------------------------------------------------------------- comparison

class MethodResult(NamedTuple):
    seed: int
    method: str           # the case's label of it (Method.label)
    spec: str             # the engine's method spec it ran (VLRNN.method_for)
    passed: bool
    max_rel_diff: float   # over every tensor compared (inf when the method raised)
    worst: str            # the tensor with the largest max_rel_diff
    error: str            # the method's exception, when it raised
    warning: str          # what the package warned of, if anything (e.g. dropout drawn once
                          # per call: exact on this CPU, maybe not elsewhere)


def _tensors(x):
    """A state, per-step losses or h0 as a tuple of tensors (PackedSequence: its data)."""
    if x is None:
        return ()
    if isinstance(x, PackedSequence):
        return (x.data,)
    return (x,) if isinstance(x, torch.Tensor) else tuple(x)


def _grad_leaves(case):
    leaves = [(f"grad rnn.{n}", p) for n, p in case.rnn.named_parameters()]
    leaves += [(f"grad out.{n}", p) for n, p in case.out.named_parameters()]
    leaves += [(f"grad h0[{i}]", t) for i, t in enumerate(_tensors(case.h0))]
    leaves += [("grad x", t) for t in _tensors(case.x)]
    return [(name, t) for name, t in leaves if t.requires_grad]


def run_once(case, model, call):
    """{tensor name: value} of one call of `model` (PlainRNN or VLRNN) on the case, from
    zeroed gradients and the case's generator state."""
    leaves = _grad_leaves(case)
    for _, t in leaves:
        t.grad = None
    torch.manual_seed(case.seed)
    loss, loss_seq, h = model(case.x, case.y, case.h0, **call)
    if loss.requires_grad:  # PlainRNN: the caller back-propagates
        loss.backward()
    named = {"loss": loss.detach(), "loss_seq": _tensors(loss_seq)[0].detach()}
    named.update({f"h[{i}]": t.detach() for i, t in enumerate(_tensors(h))})
    named.update({name: None if t.grad is None else t.grad.clone() for name, t in leaves})
    return named


def compare(got, want):
    """(max_rel_diff, worst tensor name) of `got` against `want`, each relative to the
    reference tensor's largest entry; inf where a tensor is missing on one side."""
    worst, worst_name = 0.0, "loss"
    for name, w in want.items():
        g = got.get(name)
        if (g is None) != (w is None) or (g is not None and g.shape != w.shape):
            return float("inf"), f"{name} (missing or misshapen)"
        diff = 0.0 if g is None else max_rel_diff([g], [w])
        if diff > worst or diff != diff:  # NaN is the worst
            worst, worst_name = diff, name
    return worst, worst_name


def check_case(case, methods: Optional[List[Method]] = None):
    """Each method of the case (or `methods`) against vlrnn.PlainRNN: [MethodResult]."""
    want = run_once(case, vlrnn.PlainRNN(case.rnn, case.out, case.loss_scaling), {})
    results = []
    for method in methods or case.methods:
        spec = ""
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                model = vlrnn.VLRNN(case.rnn, case.out, case.loss_scaling,
                                    fast_cells=case.fast_cells, **method.init)
                spec = model.method_for(**method.call)
                diff, worst = compare(run_once(case, model, method.call), want)
                error = ""
            except Exception as exception:  # a method that raises fails its row, saying why
                diff, worst = float("inf"), ""
                error = f"{type(exception).__name__}: {exception}"
        warning = "; ".join(sorted({str(w.message) for w in warned}))
        results.append(MethodResult(case.seed, method.label, spec, diff <= TOLERANCE, diff,
                                    worst, error, warning))
    return results
