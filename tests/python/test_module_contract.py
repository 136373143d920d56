"""What a user's module may return, and what the package checks of it: a PackedSequence is
read through its own indices, a weight the rnn and the head share gets its gradient once,
so does one parametrized under parametrize.cached(), gradient hooks run once on the whole
gradient, targets an encoder computes get theirs once, a context with a graph from outside
the call is named, sparse gradients are exact, and a module that changes its inputs in
place, returns its state in another dtype, or starts from another state than zeros when
given none, is refused with an error naming it."""
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pack_sequence, \
    pad_packed_sequence

import vlrnn
from conftest import CellLoop, CrossEntropyHead, TargetHead, grads, max_rel_diff

F, H, CLASSES = 3, 4, 5
LENGTHS = [40, 17, 33, 1, 40]  # ties: a module packing its own output may order them otherwise


class RepackingCellLoop(nn.Module):
    """A GRUCell loop that unpacks its packed input and packs its output itself, the usual
    way (enforce_sorted=False): equal lengths may come out in another order than they went
    in, which the output's own sorted_indices record. Its dropout acts on the packed input's
    rows, which the engine packs in the caller's order, so every cut draws the same masks."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.cell = nn.GRUCell(F, H)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, h):
        x = PackedSequence(self.drop(x.data), x.batch_sizes, x.sorted_indices,
                           x.unsorted_indices)
        padded, lengths = pad_packed_sequence(x, batch_first=True)  # [B, T, F]
        h = padded.new_zeros(padded.shape[0], H) if h is None else h[0]
        steps = []
        for t in range(padded.shape[1]):
            running = (t < lengths).to(padded.dtype).unsqueeze(1)  # [B, 1]
            new = self.cell(padded[:, t], h)
            h = running * new + (1 - running) * h
            steps.append(new)
        z = torch.stack(steps, 1)  # [B, T, H]
        return pack_padded_sequence(z, lengths, batch_first=True, enforce_sorted=False), \
            h.unsqueeze(0)


class LinearHead(CrossEntropyHead):
    def __init__(self):
        super().__init__(H, CLASSES)


def packed_batch(lengths=LENGTHS, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = pack_sequence([torch.randn(n, F, dtype=torch.float64, generator=g) for n in lengths],
                      enforce_sorted=False)
    y = pack_sequence([torch.randint(0, CLASSES, (n,), generator=g) for n in lengths],
                      enforce_sorted=False)
    return x, y


def gradients_of(rnn, out, x, y, h0, scaling, **call):
    modules = nn.ModuleList([rnn, out])
    modules.zero_grad()
    torch.manual_seed(7)
    if call:
        vlrnn.VLRNN(rnn, out, scaling)(x, y, h0, **call)
    else:
        vlrnn.PlainRNN(rnn, out, scaling)(x, y, h0)[0].backward()
    return grads(modules)


@pytest.mark.parametrize("call", [dict(N=1), dict(N=2), dict(N=7),
                                  dict(method="planner:percent=20")],
                         ids=["N=1", "N=2", "N=7", "planner"])
@pytest.mark.parametrize("scaling", ["SUM", "MEAN"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_an_output_packed_in_its_own_order_is_read_through_its_indices(call, scaling, dropout):
    # Before the fix, the output's data was read in the input's packing order: 0.5-0.96
    # relative error for N >= 2, with no word.
    torch.manual_seed(0)
    rnn, out = RepackingCellLoop(dropout).double(), LinearHead().double()
    x, y = packed_batch()
    h0 = torch.randn(1, len(LENGTHS), H, dtype=torch.float64)
    want = gradients_of(rnn, out, x, y, h0, scaling)
    got = gradients_of(rnn, out, x, y, h0, scaling, **call)
    assert max_rel_diff(got, want) < 1e-10


def test_an_output_with_other_lengths_is_refused():
    class Truncating(RepackingCellLoop):
        def forward(self, x, h):
            z, h = super().forward(x, h)
            padded, lengths = pad_packed_sequence(z, batch_first=True)
            return pack_padded_sequence(padded, lengths.clamp(max=1), batch_first=True,
                                        enforce_sorted=False), h
    x, y = packed_batch()
    with pytest.raises(ValueError, match=r"Truncating.forward: expected z with the lengths of "
                                         r"its input"):
        vlrnn.VLRNN(Truncating().double(), LinearHead().double(), "SUM")(x, y, None, N=2)


class InPlace(nn.Module):
    """A GRU that scales its input, or its entry state, in place."""

    def __init__(self, target):
        super().__init__()
        self.gru, self.target = nn.GRU(F, H, batch_first=True), target

    def forward(self, x, h):
        if self.target == "x":
            x.mul_(2.0)
        elif h is not None:
            h.mul_(0.5)
        return self.gru(x, h)


@pytest.mark.parametrize("target, name", [("x", "x"), ("h", r"h\[0\]")])
def test_a_module_changing_its_inputs_in_place_is_refused(target, name):
    x = torch.randn(2, 10, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (2, 10))
    kept = x.clone()
    h0 = torch.zeros(1, 2, H, dtype=torch.float64)
    with pytest.raises(ValueError, match=f"InPlace.forward: changed its input {name} in place"):
        vlrnn.VLRNN(InPlace(target).double(), LinearHead().double(), "SUM")(x, y, h0, N=2)
    if target == "h":
        assert torch.equal(x, kept)


def test_a_state_returned_in_another_dtype_is_refused():
    class Float32State(nn.GRU):
        def forward(self, x, h=None):
            z, h = super().forward(x, h)
            return z, h.float()
    x = torch.randn(2, 10, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (2, 10))
    rnn = Float32State(F, H, batch_first=True).double()
    with pytest.raises(ValueError, match=r"Float32State.forward's h\[0\]: expected "
                                         r"torch.float64 on cpu .* got torch.float32"):
        vlrnn.VLRNN(rnn, LinearHead().double(), "SUM")(x, y, None, N=2)


class DiagonalComplexRecurrence(nn.Module):
    """h_t = λ h_{t-1} + B x_t with λ complex (|λ| < 1), z_t = Re(h_t), as linear recurrent
    units hold it. as_real: its state returned as real and imaginary parts (a last dim of
    2, torch.view_as_real), else as the complex tensor itself."""

    def __init__(self, as_real):
        super().__init__()
        self.as_real = as_real
        self.log_decay = nn.Parameter(torch.rand(H, dtype=torch.float64) - 2)
        self.angle = nn.Parameter(torch.rand(H, dtype=torch.float64))
        self.input = nn.Linear(F, H).double()

    def forward(self, x, h):
        decay = torch.polar(torch.exp(-torch.exp(self.log_decay)), self.angle)  # [H]
        if h is None:
            h = torch.zeros(1, x.shape[0], H, dtype=torch.complex128)
        elif self.as_real:
            h = torch.view_as_complex(h)
        state, steps = h[0], []
        for t in range(x.shape[1]):
            state = decay * state + self.input(x[:, t])
            steps.append(state.real)
        h = state.unsqueeze(0)
        return torch.stack(steps, 1), torch.view_as_real(h) if self.as_real else h


def test_a_complex_state_is_refused_with_how_to_hold_it():
    x = torch.randn(2, 10, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (2, 10))
    rnn = DiagonalComplexRecurrence(as_real=False)
    with pytest.raises(ValueError, match=r"DiagonalComplexRecurrence.forward's h\[0\]: "
                                         r"expected a real floating-point state "
                                         r"\(torch.float64.* got torch.complex128 \(.*"
                                         r"torch.view_as_real"):
        vlrnn.VLRNN(rnn, LinearHead().double(), "SUM")(x, y, None, N=2)
    assert all(p.grad is None for p in rnn.parameters())


def test_a_complex_state_held_as_real_parts_is_exact():
    x = torch.randn(3, 12, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (3, 12))
    rnn, out = DiagonalComplexRecurrence(as_real=True), LinearHead().double()
    modules = nn.ModuleList([rnn, out])
    vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward()
    want = grads(modules)
    modules.zero_grad()
    vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=3)
    assert max_rel_diff(grads(modules), want) < 1e-10


class LearnedInitialState(nn.GRU):
    """Starts from a parameter of its own when given h = None, as many models do."""

    def __init__(self):
        super().__init__(F, H, batch_first=True)
        self.h0 = nn.Parameter(torch.randn(1, 1, H))

    def forward(self, x, h=None):
        if h is None:
            batch = int(x.batch_sizes[0]) if isinstance(x, PackedSequence) else x.shape[0]
            h = self.h0.expand(1, batch, H).contiguous()
        return super().forward(x, h)


@pytest.mark.parametrize("packed", [False, True])
def test_a_learned_initial_state_taken_for_none_is_refused(packed):
    """Ran before from zeros with no word (h0's gradient 100 % off, weight_hh's 42 %), and
    vlrnn.verify passed it: its reference started from zeros too."""
    torch.manual_seed(0)
    rnn, out = LearnedInitialState().double(), LinearHead().double()
    x, y = packed_batch() if packed else fixed_batch()
    runs = (lambda: vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=3),
            lambda: vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, method="full"),
            lambda: vlrnn.verify(rnn, out, x, y))
    for run in runs:
        with pytest.raises(ValueError, match=r"rnn: LearnedInitialState.forward\(x, None\) "
                                             r"starts from another state than zeros.*"
                                             r"Pass the initial state as h0"):
            run()
    assert all(p.grad is None for p in rnn.parameters())


def test_a_learned_initial_state_passed_as_h0_is_exact():
    torch.manual_seed(0)
    rnn, out = LearnedInitialState().double(), LinearHead().double()
    x, y = fixed_batch()
    want = gradients_of(rnn, out, x, y, None, "SUM")  # PlainRNN calls forward(x, None)
    h0 = rnn.h0.expand(1, x.shape[0], H)  # computed from the parameter: its gradient reaches it
    got = gradients_of(rnn, out, x, y, h0, "SUM", N=3)
    assert rnn.h0.grad is not None and rnn.h0.grad.abs().max() > 0
    assert max_rel_diff(got, want) < 1e-10


class TiedHead(nn.Module):
    """A head whose weight is the rnn's own (tied weights): one tensor in both modules."""

    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, z, y):
        return ((z @ self.weight.t()).sum(-1) - y) ** 2


@pytest.mark.parametrize("call", [dict(N=3), dict(method="full")], ids=["N=3", "full"])
def test_a_weight_the_rnn_and_head_share_gets_its_gradient_once(call):
    """Ran before with the shared weight's gradient doubled, and no word, whenever its .grad
    already held a tensor (zeros after zero_grad() on 1.13, an earlier micro-batch's);
    vlrnn.verify passed it."""
    torch.manual_seed(0)
    rnn = nn.GRU(F, H, batch_first=True).double()
    out = TiedHead(rnn.weight_hh_l0)  # [3H, H]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 12, F, dtype=torch.float64, generator=g)
    y = torch.randn(3, 12, dtype=torch.float64, generator=g)
    modules = nn.ModuleList([rnn, out])
    for p in modules.parameters():
        p.grad = torch.ones_like(p)  # an earlier micro-batch's
    vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward()
    want = grads(modules)
    for p in modules.parameters():
        p.grad = torch.ones_like(p)
    vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, **call)
    assert max_rel_diff(grads(modules), want) < 1e-10


class OrthogonalCellLoop(CellLoop):
    """An RNNCell loop whose recurrent weight is parametrized (orthogonal), as RNNs keep
    their recurrence stable; parametrize.cached() computes it once per call, not per step."""

    def __init__(self):
        super().__init__(parametrizations.orthogonal(nn.RNNCell(F, H), "weight_hh"))


@pytest.mark.parametrize("call", [dict(N=3), dict(method="planner:percent=20")],
                         ids=["N=3", "planner"])
def test_a_weight_parametrized_under_parametrize_cached_gets_its_gradient(call):
    """Ran before with no gradient at all for the parametrized weight, and no word: the
    probe's call without gradients cached it without a graph, and every block reused it."""
    torch.manual_seed(0)
    rnn, out = OrthogonalCellLoop().double(), LinearHead().double()
    x, y = fixed_batch(T=20)
    with parametrize.cached():
        want = gradients_of(rnn, out, x, y, None, "SUM")
    with parametrize.cached():
        got = gradients_of(rnn, out, x, y, None, "SUM", **call)
        # What the call cached stayed in its calls: the weight read here has its graph.
        assert rnn.cell.weight_hh.requires_grad and rnn.cell.weight_hh.grad_fn is not None
    assert max_rel_diff(got, want) < 1e-10


def hooked_leaves(rnn, out, x, h0):
    """The tensors of a call, each with a gradient hook that is not linear (a clamp, as
    per-parameter clipping does) and, where torch has them (2.1+), a post-accumulation hook;
    returns the list both kinds append their calls to."""
    calls = []
    def clamp(name):
        def hook(gradient):
            calls.append(name)
            return gradient.clamp(-0.01, 0.01)
        return hook
    def after(name):
        return lambda tensor: calls.append(("after", name, tensor.grad.clone()))
    leaves = [("rnn.weight_hh_l0", rnn.weight_hh_l0), ("out.linear.weight", out.linear.weight),
              ("x", x), ("h0", h0)]
    for name, tensor in leaves:
        tensor.register_hook(clamp(name))
        if hasattr(tensor, "register_post_accumulate_grad_hook"):
            tensor.register_post_accumulate_grad_hook(after(name))
    return calls


@pytest.mark.parametrize("fast_cells", [True, False], ids=["cells", "module"])
@pytest.mark.parametrize("call", [dict(N=4), dict(method="planner:percent=20")],
                         ids=["N=4", "planner"])
def test_gradient_hooks_run_once_on_the_whole_gradient(call, fast_cells):
    """Ran before with each hook called once per block, on a part of the gradient: 300 %
    off for a clamp, with no word."""
    torch.manual_seed(0)
    rnn, out = nn.GRU(F, H, batch_first=True).double(), LinearHead().double()
    x, y = fixed_batch(T=20)
    x.requires_grad_()
    h0 = torch.randn(1, x.shape[0], H, dtype=torch.float64, requires_grad=True)
    calls = hooked_leaves(rnn, out, x, h0)
    tensors = list(rnn.parameters()) + list(out.parameters()) + [x, h0]
    def run(function):
        calls.clear()
        for t in tensors:
            t.grad = torch.ones_like(t)  # an earlier micro-batch's: hooked before added
        function()
        return [t.grad.clone() for t in tensors], list(calls)
    want, want_calls = run(lambda: vlrnn.PlainRNN(rnn, out, "SUM")(x, y, h0)[0].backward())
    got, got_calls = run(lambda: vlrnn.VLRNN(rnn, out, "SUM", fast_cells=fast_cells)(
        x, y, h0, **call))
    assert max_rel_diff(got, want) < 1e-10
    clamps = sorted(c for c in want_calls if isinstance(c, str))
    assert sorted(c for c in got_calls if isinstance(c, str)) == clamps
    assert len(clamps) == 4  # once each
    seen = {c[1]: c[2] for c in got_calls if not isinstance(c, str)}
    for name, grad in ((c[1], c[2]) for c in want_calls if not isinstance(c, str)):
        assert max_rel_diff([seen[name]], [grad]) < 1e-10  # the accumulated .grad
    # vlrnn.verify compares the methods' own gradients, the hooks held off and kept.
    vlrnn.assert_exact(rnn, out, x, y, h0, fast_cells=fast_cells)
    calls.clear()
    vlrnn.PlainRNN(rnn, out, "SUM")(x, y, h0)[0].backward()
    assert len([c for c in calls if isinstance(c, str)]) == 4


def gradients_after(function, make_xy, packed, tensors, calls):
    """(the gradients of `tensors`, the hook `calls` sorted) after function(x, y) on
    (x, y) = make_xy() (batch-first; packed with LENGTHS when `packed`), each .grad preset
    as an earlier micro-batch's would be."""
    calls.clear()
    for t in tensors:
        t.grad = torch.ones_like(t)
    x, y = make_xy()
    if packed:
        lengths = torch.tensor(LENGTHS)
        x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y = pack_padded_sequence(y, lengths, batch_first=True, enforce_sorted=False)
    function(x, y)
    return [t.grad.clone() for t in tensors], sorted(calls)


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("call", [dict(N=4), dict(method="planner:percent=20"),
                                  dict(method="full")], ids=["N=4", "planner", "full"])
def test_targets_an_encoder_computes_get_their_gradient_once(call, packed):
    """Raised before ('Trying to backward through the graph a second time': each block's
    backward entered y's graph), or with a graph holding no saved tensor, ran each upstream
    hook once per block: a clamp on the parts, with no word."""
    torch.manual_seed(0)
    rnn, out = nn.GRU(F, H, batch_first=True).double(), TargetHead(H, F).double()
    encoder = nn.Linear(F, F).double()  # its backward needs its saved input
    g = torch.Generator().manual_seed(0)
    raw = torch.randn(len(LENGTHS), max(LENGTHS), F, dtype=torch.float64, generator=g)
    leaf = raw[:, :, :1].clone().requires_grad_()  # a target of the caller's own, a leaf
    calls = []
    encoder.weight.register_hook(lambda grad: calls.append("weight") or grad.clamp(-0.1, 0.1))
    leaf.register_hook(lambda grad: calls.append("leaf") or grad.clamp(-0.01, 0.01))
    tensors = [*rnn.parameters(), *out.parameters(), *encoder.parameters(), leaf]

    def run(function):
        return gradients_after(  # y: [B, T, F]
            function, lambda: (raw, torch.cat([encoder(raw)[:, :, 1:], leaf], 2)), packed,
            tensors, calls)

    want, want_calls = run(lambda x, y: vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward())
    got, got_calls = run(lambda x, y: vlrnn.VLRNN(rnn, out, "SUM")(x, y, **call))
    assert max_rel_diff(got, want) < 1e-10
    assert got_calls == want_calls == ["leaf", "weight"]


@pytest.mark.parametrize("fast_cells", [True, False], ids=["cells", "module"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("call", [dict(N=4), dict(method="planner:percent=20"),
                                  dict(method="full")], ids=["N=4", "planner", "full"])
def test_x_and_y_from_one_encoder_enter_its_graph_once(call, packed, fast_cells):
    """Next-step prediction in an encoder's space: x = e[:, :-1], y = e[:, 1:] of one
    encoder output e. Raised before ('Trying to backward through the graph a second time',
    then a ValueError that blamed a context): the engine entered x's graph, then y's."""
    torch.manual_seed(0)
    rnn, out = nn.LSTM(F, H, batch_first=True).double(), TargetHead(H, F).double()
    encoder = nn.Linear(F, F).double()  # tanh on it: both save tensors for their backward
    g = torch.Generator().manual_seed(0)
    raw = torch.randn(len(LENGTHS), max(LENGTHS) + 1, F, dtype=torch.float64, generator=g)
    calls = []
    encoder.weight.register_hook(lambda grad: calls.append("weight") or grad.clamp(-0.1, 0.1))
    tensors = [*rnn.parameters(), *out.parameters(), *encoder.parameters()]

    def next_steps():
        e = torch.tanh(encoder(raw))  # [B, T + 1, F]
        return e[:, :-1], e[:, 1:]

    def run(function):
        return gradients_after(function, next_steps, packed, tensors, calls)

    want, want_calls = run(lambda x, y: vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward())
    got, got_calls = run(lambda x, y: vlrnn.VLRNN(rnn, out, "SUM", fast_cells=fast_cells)(
        x, y, **call))
    assert max_rel_diff(got, want) < 1e-10
    assert got_calls == want_calls == ["weight"]


class Conditioned(nn.Module):
    """A GRU conditioned on a per-sequence context [B, C] held as an attribute, or, with
    none, taking it as x's last C features."""

    def __init__(self, context_size):
        super().__init__()
        self.gru = nn.GRU(F + context_size, H, batch_first=True)
        self.context = None

    def forward(self, x, h):
        if self.context is not None:
            x = torch.cat([x, self.context.unsqueeze(1).expand(-1, x.shape[1], -1)], 2)
        return self.gru(x, h)


def test_a_context_with_a_graph_from_outside_the_call_is_named():
    """Raised before autograd's 'Trying to backward through the graph a second time', which
    names neither the cause nor a way out. The way the message gives is exact."""
    torch.manual_seed(0)
    rnn, out, encoder = Conditioned(2).double(), LinearHead().double(), nn.Linear(5, 2).double()
    x, y = fixed_batch()
    info = torch.randn(x.shape[0], 5, dtype=torch.float64)
    rnn.context = torch.tanh(encoder(info))  # tanh keeps its result for the backward
    with pytest.raises(ValueError, match=r"a tensor with a graph from outside the call.*"
                                         r"Pass it in x instead"):
        vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=3)
    assert all(p.grad is None for p in [*rnn.parameters(), *out.parameters()])
    rnn.context = None
    tensors = [*rnn.parameters(), *out.parameters(), *encoder.parameters()]

    def gradients(function):
        for t in tensors:
            t.grad = None
        context = torch.tanh(encoder(info)).unsqueeze(1).expand(-1, x.shape[1], -1)
        function(torch.cat([x, context], 2))
        return [t.grad.clone() for t in tensors]

    want = gradients(lambda xc: vlrnn.PlainRNN(rnn, out, "SUM")(xc, y)[0].backward())
    got = gradients(lambda xc: vlrnn.VLRNN(rnn, out, "SUM")(xc, y, None, N=3))
    assert max_rel_diff(got, want) < 1e-10


class EmbeddedTokens(nn.Module):
    """A GRU on token embeddings (x's first feature holds the token) plus x's other
    features, the embedding's gradient sparse."""

    def __init__(self, tokens=5):
        super().__init__()
        self.embedding = nn.Embedding(tokens, F - 1, sparse=True)
        self.gru = nn.GRU(F - 1, H, batch_first=True)

    def forward(self, x, h):
        return self.gru(self.embedding(x[..., 0].long()) + x[..., 1:], h)


class EmbeddedTargetHead(nn.Module):
    """A score against the target's embedding (sparse gradient), as negative sampling does."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(CLASSES, H, sparse=True)

    def forward(self, z, y):
        return nn.functional.softplus(-(z * self.embedding(y)).sum(-1))


def test_sparse_gradients_are_exact_and_verified():
    """Raised before NotImplementedError ('aten::max' on SparseCPU), from the first-call
    check and from vlrnn.verify's comparison."""
    torch.manual_seed(0)
    rnn, out = EmbeddedTokens().double(), EmbeddedTargetHead().double()
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randint(0, 5, (3, 12, 1), generator=g).double(),
                   torch.randn(3, 12, F - 1, dtype=torch.float64, generator=g)], 2)
    y = torch.randint(0, CLASSES, (3, 12), generator=g)
    modules = nn.ModuleList([rnn, out])

    def gradients(function):
        modules.zero_grad(set_to_none=True)
        vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward()  # an earlier micro-batch's
        function()
        assert rnn.embedding.weight.grad.is_sparse and out.embedding.weight.grad.is_sparse
        return [p.grad.to_dense() for p in modules.parameters()]

    want = gradients(lambda: vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward())
    got = gradients(lambda: vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=4))
    assert max_rel_diff(got, want) < 1e-10
    vlrnn.assert_exact(rnn, out, x, y)


def fixed_batch(T=12, B=3):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, T, F, dtype=torch.float64, generator=g),
            torch.randint(0, CLASSES, (B, T), generator=g))


def test_a_head_returning_a_detached_loss_is_refused():
    class Detached(LinearHead):
        def forward(self, z, y):
            return super().forward(z, y).detach()
    x, y = fixed_batch()
    with pytest.raises(ValueError, match=r"Detached.forward: returned a per-step loss that does "
                                         r"not depend on z \(it has no grad_fn"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True).double(), Detached().double(), "SUM")(
            x, y, None, N=3)


def test_a_head_calling_backward_itself_is_refused():
    class Backward(LinearHead):
        def forward(self, z, y):
            loss = super().forward(z, y)
            if torch.is_grad_enabled():
                loss.sum().backward(retain_graph=True)
            return loss
    x, y = fixed_batch()
    rnn, out = nn.GRU(F, H, batch_first=True).double(), Backward().double()
    with pytest.raises(ValueError, match=r"Backward.forward: called backward\(\) itself"):
        vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=3)
    assert all(p.grad is None for p in list(rnn.parameters()) + list(out.parameters()))


def test_an_error_inside_a_block_says_which_block_it_was():
    class Picky(LinearHead):
        def forward(self, z, y):
            if z.shape[1] != 12:
                raise RuntimeError(f"expected 12 steps, got {z.shape[1]}")
            return super().forward(z, y)
    x, y = fixed_batch()
    with pytest.raises(RuntimeError, match="expected 12 steps, got 4") as raised:
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True).double(), Picky().double(), "SUM",
                    check_cuts=False)(x, y, None, N=3)
    assert type(raised.value) is RuntimeError  # the user's own exception, unchanged ...
    notes = getattr(raised.value, "__notes__", None)
    if notes is not None:  # ... with a note on Python 3.11+
        assert notes == ["vlrnn: raised by Picky.forward on a block of 4 of the sequence's 12 "
                         "steps (z [3, 4, 4], y [3, 4]): VLRNN calls it block by block, so the "
                         "shapes in the message are the block's"]


def test_a_wrong_feature_count_is_named_before_torch_names_a_block():
    x, y = fixed_batch()
    with pytest.raises(ValueError, match=r"x: expected 5 features per step \(GRU's input_size\), "
                                         r"got 3"):
        vlrnn.VLRNN(nn.GRU(5, H, batch_first=True).double(), LinearHead().double(), "SUM")(
            x, y, None, N=3)


class ViewOfInput(nn.Module):
    """z a view of its input (a skip connection with no copy) beside a GRU's state: what the
    engine keeps of a block must not alias what it hands back."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, F, batch_first=True)

    def forward(self, x, h):
        if isinstance(x, PackedSequence):
            _, h = self.gru(x, h)
            return x, h  # the packed input itself
        _, h = self.gru(x, h)
        return x[:, :, :F], h  # a view of x


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_a_module_returning_a_view_of_its_input_is_exact(packed):
    torch.manual_seed(0)
    rnn, out = ViewOfInput().double(), CrossEntropyHead(F, CLASSES).double()
    if packed:
        x, y = packed_batch()
    else:
        x, y = fixed_batch()
        x.requires_grad_(True)
    h0 = torch.randn(1, 5 if packed else 3, F, dtype=torch.float64)
    want = gradients_of(rnn, out, x, y, h0, "SUM")
    want_x = None if packed else x.grad.clone()
    if not packed:
        x.grad = None
    got = gradients_of(rnn, out, x, y, h0, "SUM", N=3)
    assert max_rel_diff(got, want) < 1e-10  # the head's: the loss reads z = x alone
    if not packed:
        assert max_rel_diff([x.grad], [want_x]) < 1e-10
