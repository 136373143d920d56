"""resets= on PlainRNN, VLRNN and vlrnn.verify: sequences that restart from their initial
state inside a batch (episodes or documents packed into one stream). PlainRNN's resets
against the segments run as separate sequences, and VLRNN's every method against PlainRNN
(float64, 1e-10), on every path a module takes into the engine.
Shapes: B = 3 sequences, T = 9 steps, F = 3 features, H = 5 hidden."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import GRU, CrossEntropyHead, as_tuple, leaves, packed, worst, zero

B, T, F, H, C = 3, 9, 3, 5, 3
# A reset at step 0 (changes nothing), two in adjacent steps (3, 4), one at a last step (8),
# one inside sequence 2's padded tail when lengths are used (7 >= 6).
STARTS = [[0, 3, 4], [5, 8], [2, 7]]
LENGTHS = torch.tensor([9, 9, 6])


def make_rnn(kind):
    torch.manual_seed(3)
    return {
        "nn.LSTM": lambda: nn.LSTM(F, H, num_layers=2, batch_first=True),  # the cells
        "nn.LSTM as itself": lambda: nn.LSTM(F, H, num_layers=2, batch_first=True),
        "python GRU": lambda: GRU(F, H, batch_first=True),  # called block by block
        "vlrnn.nn.MinGRU": lambda: vlrnn.nn.MinGRU(F, H, num_layers=2, batch_first=True),
    }[kind]().double()


KINDS = ["nn.LSTM", "nn.LSTM as itself", "python GRU", "vlrnn.nn.MinGRU"]
METHODS = ["full", "vlrnn:block_length=1", "vlrnn:block_length=4", "checkpoint:segments=2",
           "revolve:slots=2", "planner:percent=30"]


def problem(kind):
    rnn, out = make_rnn(kind), CrossEntropyHead(H, C).double()
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(B, T, F, dtype=torch.float64, generator=generator)
    y = torch.randint(0, C, (B, T), generator=generator)
    with torch.no_grad():
        h = rnn(x)[1]
    h0 = tuple(torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in as_tuple(h))
    return rnn, out, x, y, h0 if isinstance(h, tuple) else h0[0]


def mask_of(starts):
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, steps in enumerate(starts):
        mask[b, steps] = True
    return mask


def grads(modules, *tensors):
    return [p.grad.clone() for m in modules for p in m.parameters()] + \
        [t.grad.clone() for t in tensors]


def run(model, rnn, out, x, y, h0, lengths=None, **kwargs):
    """(loss, loss_seq, h, gradients of the parameters, h0 and x) of one call; x and y
    packed with `lengths` when given."""
    zero(rnn, out)
    x_leaf, h0_leaves = x.detach().clone().requires_grad_(), leaves(h0)
    xs, ys = (x_leaf, y) if lengths is None else (packed(x_leaf, lengths), packed(y, lengths))
    loss, loss_seq, h = model(xs, ys, h0_leaves, **kwargs)
    if loss.requires_grad:  # PlainRNN: the caller back-propagates
        loss.backward()
    loss_seq = loss_seq.data if lengths is not None else loss_seq  # packed as x
    return loss.detach(), loss_seq.detach(), h, grads((rnn, out), x_leaf, *as_tuple(h0_leaves))


def test_plain_rnn_resets_equal_the_segments_run_as_separate_sequences():
    rnn, out, x, y, h0 = problem("nn.LSTM")
    loss, _, h, got = run(vlrnn.PlainRNN(rnn, out, "SUM"), rnn, out, x, y, h0,
                          resets=mask_of(STARTS))
    # The reference: each segment its own call of the rnn from its sequence's h0 row.
    zero(rnn, out)
    x_leaf, h0_leaves = x.detach().clone().requires_grad_(), leaves(h0)
    total, finals = 0, []
    for b, starts in enumerate(STARTS):
        cuts = sorted({0, T} | {t for t in starts if 0 < t < T})
        for a, e in zip(cuts[:-1], cuts[1:]):
            z, h_seg = rnn(x_leaf[b:b + 1, a:e], tuple(t[:, b:b + 1] for t in h0_leaves))
            total = total + out(z, y[b:b + 1, a:e]).sum()
        finals.append(h_seg)
    total.backward()
    want = grads((rnn, out), x_leaf, *h0_leaves)
    assert abs(loss - total.detach()) < 1e-10 * abs(total.detach())
    assert worst(got, want) < 1e-10
    for i, t in enumerate(as_tuple(h)):
        assert torch.allclose(t, torch.cat([f[i] for f in finals], 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lengths", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("kind,method", [(k, m) for k in KINDS for m in METHODS])
def test_every_method_equals_plain_rnn_with_resets(kind, method, lengths):
    rnn, out, x, y, h0 = problem(kind)
    fast_cells = kind != "nn.LSTM as itself"
    lengths = LENGTHS if lengths else None
    resets = mask_of(STARTS)
    want = run(vlrnn.PlainRNN(rnn, out, "MEAN"), rnn, out, x, y, h0, lengths, resets=resets)
    got = run(vlrnn.VLRNN(rnn, out, "MEAN", method=method, fast_cells=fast_cells), rnn, out,
              x, y, h0, lengths, resets=resets)
    assert abs(got[0] - want[0]) <= 1e-10 * abs(want[0])
    assert torch.allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
    assert worst(got[3], want[3]) < 1e-10
    for a, b in zip(as_tuple(got[2]), as_tuple(want[2])):
        assert torch.allclose(a, b.detach(), rtol=1e-12, atol=1e-12)
    # The resets did something: without them the gradients differ.
    assert worst(run(vlrnn.VLRNN(rnn, out, "MEAN", method=method, fast_cells=fast_cells),
                     rnn, out, x, y, h0, lengths)[3], want[3]) > 1e-6


def test_segment_starts_equal_the_mask():
    rnn, out, x, y, h0 = problem("nn.LSTM")
    model = vlrnn.VLRNN(rnn, out, "SUM", method="vlrnn:block_length=2")
    by_mask = run(model, rnn, out, x, y, h0, resets=mask_of(STARTS))
    offsets = [torch.tensor(s) for s in STARTS]
    by_offsets = run(model, rnn, out, x, y, h0, resets=offsets)
    by_lists = run(model, rnn, out, x, y, h0, resets=[list(s) + [T] for s in STARTS])
    assert worst(by_offsets[3], by_mask[3]) == 0 and worst(by_lists[3], by_mask[3]) == 0
    # One tensor of cu_seqlens-style offsets for a batch of one stream.
    one = run(model, rnn, out, x[:1], y[:1], tuple(t[:, :1] for t in h0),
              resets=torch.tensor([0, 3, 4, 9]))
    one_mask = run(model, rnn, out, x[:1], y[:1], tuple(t[:, :1] for t in h0),
                   resets=mask_of(STARTS)[:1])
    assert worst(one[3], one_mask[3]) == 0


def test_resets_that_change_nothing_are_dropped():
    rnn, out, x, y, h0 = problem("nn.LSTM")
    model = vlrnn.VLRNN(rnn, out, "SUM", method="vlrnn:block_length=2")
    plain = run(model, rnn, out, x, y, h0, LENGTHS)
    # Step 0 and sequence 2's padded tail (its length is 6).
    dropped = run(model, rnn, out, x, y, h0, LENGTHS, resets=[[0], [0], [6, 8]])
    assert worst(dropped[3], plain[3]) == 0


def test_a_learned_initial_state_gets_every_segments_gradient():
    rnn, out, x, y, _ = problem("python GRU")
    initial = torch.randn(1, 1, H, dtype=torch.float64, requires_grad=True)

    def gradient(model):
        zero(rnn, out)
        initial.grad = None
        loss = model(x, y, torch.tanh(initial).expand(1, B, H), resets=mask_of(STARTS))[0]
        if loss.requires_grad:  # PlainRNN: the caller back-propagates
            loss.backward()
        return initial.grad.clone()

    want = gradient(vlrnn.PlainRNN(rnn, out))
    assert worst([gradient(vlrnn.VLRNN(rnn, out, method="vlrnn:block_length=2"))], [want]) < 1e-10


def test_verify_takes_resets():
    rnn, out, x, y, h0 = problem("python GRU")
    report = vlrnn.verify(rnn, out, x, y, leaves(h0), methods=["vlrnn:block_length=2", "revolve"],
                          resets=mask_of(STARTS))
    assert report.passed, str(report)


def test_no_grad_evaluation_takes_resets():
    rnn, out, x, y, h0 = problem("nn.LSTM")
    model = vlrnn.VLRNN(rnn, out, "SUM")
    with torch.no_grad():
        loss = model(x, y, h0, resets=mask_of(STARTS))[0]
    want = vlrnn.PlainRNN(rnn, out, "SUM")(x, y, h0, resets=mask_of(STARTS))[0]
    assert abs(loss - want.detach()) < 1e-10 * abs(want.detach())


@pytest.mark.parametrize("resets,error,words", [
    (torch.zeros(B, T + 1, dtype=torch.bool), ValueError, ["resets", "[3, 9]", "[3, 10]"]),
    (torch.zeros(B, T), TypeError, ["resets", "float"]),
    (torch.tensor([0, 4]), ValueError, ["resets", "one sequence", "list of 3"]),
    ([[1], [2]], ValueError, ["resets", "3 sequences", "2 lists"]),
    ([[1], [2], [10]], ValueError, ["resets[2]", "[0, T = 9]", "10"]),
    ("3,4", TypeError, ["resets", "str"]),
])
def test_bad_resets_are_refused_naming_the_argument(resets, error, words):
    rnn, out, x, y, h0 = problem("nn.LSTM")
    for model in (vlrnn.PlainRNN(rnn, out), vlrnn.VLRNN(rnn, out)):
        with pytest.raises(error) as raised:
            model(x, y, resets=resets)
        for word in words:
            assert word in str(raised.value)


def test_a_bidirectional_rnn_restarts_both_directions_in_every_method():
    torch.manual_seed(4)
    rnn = nn.LSTM(F, H, num_layers=2, batch_first=True, bidirectional=True).double()
    out = CrossEntropyHead(2 * H, C).double()
    x, y = torch.randn(B, T, F, dtype=torch.float64), torch.randint(0, C, (B, T))
    h0 = tuple(torch.randn(4, B, H, dtype=torch.float64) for _ in range(2))
    resets = mask_of(STARTS)
    want = run(vlrnn.VLRNN(rnn, out, method="full"), rnn, out, x, y, h0, resets=resets)
    for method in ("bivlrnn:block_length=2", "checkpoint:segments=3", "planner:percent=30"):
        got = run(vlrnn.VLRNN(rnn, out, method=method), rnn, out, x, y, h0, resets=resets)
        assert worst(got[3], want[3]) < 1e-10, method
    # PlainRNN's stretches would cut the backward direction: refused, naming the way out.
    with pytest.raises(ValueError, match="method='full'"):
        vlrnn.PlainRNN(rnn, out)(x, y, resets=resets)
