"""grad_h= on VLRNN.forward (dL/d(final state) from a later consumer) and h0.grad, on every
path a module takes into the engine: against autograd of PlainRNN's loss plus <grad_h, h>,
and a stream cut into calls against one call on the whole stream (float64, SUM, 1e-10).
Shapes: B = 4 sequences, T = 7 steps, F = 3 features, H = 5 hidden."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import GRU, CrossEntropyHead, as_tuple, leaves, packed, worst, zero

B, T, F, H, C = 4, 7, 3, 5, 3
LENGTHS = torch.tensor([7, 2, 5, 1])  # one of 1, one ending inside a call of 2 or 3 steps


def make_rnn(kind):
    torch.manual_seed(3)
    return {
        "nn.LSTM": lambda: nn.LSTM(F, H, num_layers=2, batch_first=True),  # the cells
        "nn.GRU": lambda: nn.GRU(F, H, batch_first=True),
        "python GRU": lambda: GRU(F, H, batch_first=True),  # called block by block
        "vlrnn.nn.MinGRU": lambda: vlrnn.nn.MinGRU(F, H, num_layers=2, batch_first=True),
        "bidirectional nn.LSTM": lambda: nn.LSTM(F, H, num_layers=2, batch_first=True,
                                                 bidirectional=True),
    }[kind]().double()


LEFT_TO_RIGHT = ["nn.LSTM", "nn.GRU", "python GRU", "vlrnn.nn.MinGRU"]
METHODS = ["full", "vlrnn:block_length=1", "vlrnn:block_length=5", "checkpoint:segments=2",
           "revolve:slots=2", "planner:percent=30"]
BIDIRECTIONAL_METHODS = ["full", "bivlrnn:block_length=1", "bivlrnn:block_length=3", "checkpoint:segments=3"]


def state_like(h, generator):
    """A random state in h's layout (a tensor or a tuple)."""
    if isinstance(h, torch.Tensor):
        return torch.randn(h.shape, dtype=h.dtype, generator=generator)
    return tuple(torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in h)


def problem(kind, variable):
    rnn, out = make_rnn(kind), CrossEntropyHead(2 * H if "bidirectional" in kind else H, C)
    out.double()
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(B, T, F, dtype=torch.float64, generator=generator)
    y = torch.randint(0, C, (B, T), generator=generator)
    with torch.no_grad():
        h = rnn(x)[1]
    h0, seed = state_like(h, generator), state_like(h, generator)
    if variable:
        x, y = packed(x, LENGTHS), packed(y, LENGTHS)
    return rnn, out, x, y, h0, seed


def gradients(modules, h0):
    grads = [p.grad.clone() for m in modules for p in m.parameters()]
    return grads + [t.grad.clone() for t in as_tuple(h0)]


@pytest.mark.parametrize("variable", [False, True], ids=["fixed", "packed"])
@pytest.mark.parametrize("kind,method",
                         [(k, m) for k in LEFT_TO_RIGHT for m in METHODS]
                         + [("bidirectional nn.LSTM", m) for m in BIDIRECTIONAL_METHODS])
def test_grad_h_and_h0_grad_equal_autograd(kind, method, variable):
    rnn, out, x, y, h0, seed = problem(kind, variable)
    zero(rnn, out)
    reference_h0 = leaves(h0)
    loss, _, h = vlrnn.PlainRNN(rnn, out, "SUM")(x, y, reference_h0)
    (loss + sum((a * b).sum() for a, b in zip(as_tuple(h), as_tuple(seed)))).backward()
    want = gradients((rnn, out), reference_h0)

    zero(rnn, out)
    got_h0 = leaves(h0)
    _, _, h_got = vlrnn.VLRNN(rnn, out, "SUM", method=method)(x, y, got_h0, grad_h=seed)
    got = gradients((rnn, out), got_h0)
    assert worst(got, want) < 1e-10
    for a, b in zip(as_tuple(h_got), as_tuple(h)):
        assert torch.allclose(a, b.detach(), rtol=1e-12, atol=1e-12)
    # Without grad_h, the gradients differ: the seed was not lost.
    zero(rnn, out)
    vlrnn.VLRNN(rnn, out, "SUM", method=method)(x, y, leaves(h0))
    assert worst([p.grad for m in (rnn, out) for p in m.parameters()], want[:-len(as_tuple(h0))]) > 1e-6


def chunked(model, rnn, x, y, h0, seed, call, lengths):
    """The stream cut into calls of `call` steps; a sequence that ended takes no part in
    later calls (its state and gradient pass them unchanged). Forward without gradients
    for each call's entry state, then backward last call to first, each call seeded with
    the gradient at its end. Returns dL/dh0 of the whole stream, in h0's layout."""
    calls, h = [], tuple(t.detach() for t in as_tuple(h0))
    for t0 in range(0, T, call):
        n = min(call, T - t0)
        alive = (lengths > t0).nonzero().squeeze(1)
        steps = (lengths[alive] - t0).clamp(max=n)
        xs, ys = x[alive, t0:t0 + n], y[alive, t0:t0 + n]
        if not bool((steps == n).all()):
            xs, ys = packed(xs, steps), packed(ys, steps)
        entry = tuple(t[:, alive] for t in h)
        calls.append((alive, xs, ys, entry))
        with torch.no_grad():
            h_out = as_tuple(model(xs, ys, to_layout(entry, h0))[2])
        h = tuple(t.index_copy(1, alive, e) for t, e in zip(h, h_out))
    delta = tuple(t.clone() for t in as_tuple(seed))
    for alive, xs, ys, entry in reversed(calls):
        entry = tuple(t.clone().requires_grad_() for t in entry)
        grad_h = tuple(d[:, alive] for d in delta)
        model(xs, ys, to_layout(entry, h0), grad_h=to_layout(grad_h, h0))
        delta = tuple(d.index_copy(1, alive, e.grad) for d, e in zip(delta, entry))
    return to_layout(delta, h0)


def to_layout(tensors, like):
    return tensors[0] if isinstance(like, torch.Tensor) else tuple(tensors)


@pytest.mark.parametrize("variable", [False, True], ids=["fixed", "variable"])
@pytest.mark.parametrize("kind,method", [(k, m) for k in LEFT_TO_RIGHT for m in METHODS])
def test_stream_cut_into_calls_equals_one_call(kind, method, variable):
    rnn, out, x, y, h0, seed = problem(kind, False)
    lengths = LENGTHS if variable else torch.full((B,), T)
    model = vlrnn.VLRNN(rnn, out, "SUM", method=method)
    zero(rnn, out)
    whole_h0 = leaves(h0)
    xw, yw = (packed(x, lengths), packed(y, lengths)) if variable else (x, y)
    model(xw, yw, whole_h0, grad_h=seed)
    want = gradients((rnn, out), whole_h0)
    for call in (1, 2, 3):  # vlrnn:block_length=5: a block longer than the call
        zero(rnn, out)
        h0_grad = chunked(model, rnn, x, y, h0, seed, call, lengths)
        got = [p.grad.clone() for m in (rnn, out) for p in m.parameters()] + list(as_tuple(h0_grad))
        assert worst(got, want) < 1e-10, f"calls of {call}"


def test_bad_grad_h_is_refused():
    rnn, out, x, y, h0, seed = problem("nn.LSTM", False)
    model = vlrnn.VLRNN(rnn, out, "SUM")
    with pytest.raises(TypeError, match=r"grad_h: expected a tensor or a tuple"):
        model(x, y, grad_h=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"grad_h: expected a state of 2 tensor\(s\), got 1"):
        model(x, y, grad_h=seed[0])
    with pytest.raises(ValueError, match=r"grad_h\[1\]: expected shape \[2, 4, 5\].*got \[2, 3, 5\]"):
        model(x, y, grad_h=(seed[0], seed[1][:, :3]))
    with pytest.raises(TypeError, match=r"grad_h\[0\]: expected dtype torch.float64.*float32"):
        model(x, y, grad_h=(seed[0].float(), seed[1]))
