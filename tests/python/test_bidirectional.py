"""Bidirectional RNNs from Python: torch.nn's LSTM / GRU (bidirectional=True), vlrnn.nn's and
the C++ bidirectional kinds train with the bidirectional block method (bivlrnn), whose
gradients equal full BPTT's; methods that cannot run them are refused by name."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


def stock(kind, layers, dtype):
    module = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
    return module(F, H, num_layers=layers, batch_first=True, bidirectional=True).to(dtype)


def cast(batch, dtype):
    x, y = batch
    if isinstance(x, torch.Tensor):
        return x.to(dtype), y
    return x._replace(data=x.data.to(dtype)), y


def full_and_block(rnn, out, x, y, h0=None, **kwargs):
    """(loss, gradients, final state) of full BPTT in PyTorch and of VLRNN, from the same
    generator state."""
    results = []
    for model in (vlrnn.PlainRNN(rnn, out, "MEAN"), vlrnn.VLRNN(rnn, out, "MEAN", **kwargs)):
        rnn.zero_grad(), out.zero_grad()
        if h0 is not None:
            for t in h0:
                t.grad = None
        torch.manual_seed(7)
        loss, _, h = model(x, y, h0)
        if isinstance(model, vlrnn.VLRNN):
            assert model.last_counters is not None
        else:
            loss.backward()
        h = h if isinstance(h, tuple) else (h,)
        extra = [t.grad.clone() for t in h0] if h0 is not None else []
        results.append((loss.detach(), grads([rnn, out]) + extra, [t.detach() for t in h]))
    return results


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_a_stock_bidirectional_module_matches_full_bptt(kind, dtype, packed):
    # Full BPTT is torch.nn's own bidirectional module under loss.backward(); VLRNN runs the
    # hand-written cells on its parameters with the bidirectional block method.
    torch.manual_seed(0)
    rnn, out = stock(kind, 2, dtype), MlpHead(2 * H, CLASSES).to(dtype)
    x, y = cast(make_batch(packed), dtype)
    (loss_ref, g_ref, h_ref), (loss, g, h) = full_and_block(rnn, out, x, y, N=4)
    tolerance = TOLERANCE[dtype]
    assert all(t is not None for t in g_ref)
    assert abs(loss.item() - loss_ref.item()) <= tolerance * abs(loss_ref.item())
    assert max_rel_diff(g, g_ref) < tolerance
    assert max_rel_diff(h, h_ref) < tolerance
    batch = int(x.batch_sizes[0]) if packed else x.shape[0]
    assert [list(t.shape) for t in h] == [[4, batch, H]] * len(h)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_h0_and_its_gradient_cross_in_torch_nns_layout(kind):
    torch.manual_seed(1)
    rnn, out = stock(kind, 2, torch.float64), MlpHead(2 * H, CLASSES).double()
    x, y = make_batch(True)
    batch = int(x.batch_sizes[0])
    h0 = tuple(torch.randn(4, batch, H, dtype=torch.float64, requires_grad=True)
               for _ in range(2 if kind == "lstm" else 1))
    h0_arg = h0 if kind == "lstm" else h0[0]
    results = []
    for model in (vlrnn.PlainRNN(rnn, out), vlrnn.VLRNN(rnn, out, method="bivlrnn:block_length=4")):
        rnn.zero_grad(), out.zero_grad()
        for t in h0:
            t.grad = None
        loss, _, _ = model(x, y, h0_arg)
        if loss.requires_grad:
            loss.backward()
        results.append(grads([rnn, out]) + [t.grad.clone() for t in h0])
    assert max_rel_diff(results[1], results[0]) < 1e-10


def test_vlrnn_nn_bidirectional_with_dropout_is_exact():
    # Dropout between the layers, one [B, 2H] mask per step: bivlrnn replays every draw.
    torch.manual_seed(2)
    rnn = vlrnn.nn.LSTM(F, H, num_layers=2, dropout=0.3, bidirectional=True,
                        batch_first=True).double()
    out = MlpHead(2 * H, CLASSES).double()
    x, y = make_batch(True)
    (loss_ref, g_ref, h_ref), (loss, g, h) = full_and_block(rnn, out, x, y, N=3)
    assert abs(loss.item() - loss_ref.item()) < 1e-12
    assert max_rel_diff(g, g_ref) < 1e-10 and max_rel_diff(h, h_ref) < 1e-10
    report = vlrnn.assert_exact(rnn, out, x, y)
    assert [row.method for row in report] == list(vlrnn.BIDIRECTIONAL_METHODS)


@pytest.mark.parametrize("kind", ["bilstm", "bigru", "bi:mingru", "bi:ssm"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_the_cpp_bidirectional_kinds_match_full_bptt(kind, packed):
    torch.manual_seed(0)
    rnn = vlrnn.CppModel(kind, F, H, num_layers=2, dtype=torch.float64)
    assert rnn.bidirectional
    out = MlpHead(2 * H, CLASSES).double()
    x, y = make_batch(packed)
    (loss_ref, g_ref, h_ref), (loss, g, h) = full_and_block(rnn, out, x, y, N=3)
    assert max_rel_diff(g, g_ref) < 1e-10 and max_rel_diff(h, h_ref) < 1e-10


@pytest.mark.parametrize("method", ["checkpoint", "full", "bivlrnn:block_length=1"])
def test_every_method_that_handles_a_bidirectional_rnn_is_exact(method):
    torch.manual_seed(4)
    rnn, out = stock("gru", 2, torch.float64), MlpHead(2 * H, CLASSES).double()
    x, y = make_batch(True)
    (_, g_ref, h_ref), (_, g, h) = full_and_block(rnn, out, x, y, method=method)
    assert max_rel_diff(g, g_ref) < 1e-10 and max_rel_diff(h, h_ref) < 1e-10


def test_an_optimizer_trains_a_bidirectional_lstm_by_blocks():
    torch.manual_seed(3)
    rnn, out = stock("lstm", 1, torch.float32), MlpHead(2 * H, CLASSES)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=5)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    x = torch.randn(8, 40, F)
    y = (x[:, :, 0].roll(-1, dims=1) > 0).long()  # the next step's sign
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss, _, _ = model(x, y)
        optimizer.step()
        losses.append(loss.item())
    assert model.method_for() == "bivlrnn:num_blocks=5"
    assert losses[-1] < 0.7 * losses[0], losses


def test_what_cannot_run_a_bidirectional_rnn_is_refused_by_name():
    x, y = make_batch(False)
    out = MlpHead(2 * H, CLASSES).double()
    rnn = stock("lstm", 1, torch.float64)
    with pytest.raises(ValueError, match="method: 'vlrnn' cuts the sequence.*'bivlrnn'"):
        vlrnn.VLRNN(rnn, out, method="vlrnn:num_blocks=3")(x, y)
    with pytest.raises(ValueError, match="method: 'tbptt' cuts the sequence"):
        vlrnn.VLRNN(vlrnn.CppModel("bigru", F, H, dtype=torch.float64), out,
                    method="tbptt:k=5")(x, y)
    with pytest.raises(ValueError, match="fast_cells: a bidirectional torch.nn module"):
        vlrnn.VLRNN(rnn, out, fast_cells=False)(x, y)
    dropped = nn.GRU(F, H, num_layers=2, dropout=0.2, bidirectional=True,
                     batch_first=True).double()
    with pytest.raises(ValueError, match="rnn: a bidirectional GRU .* dropout between layers"):
        vlrnn.VLRNN(dropped, out)(x, y)
    time_major = nn.LSTM(F, H, bidirectional=True).double()
    with pytest.raises(ValueError, match="batch_first"):
        vlrnn.VLRNN(time_major, out)(x, y)

    class OwnForward(nn.LSTM):
        def forward(self, x, h=None):
            return super().forward(x, h)
    with pytest.raises(ValueError, match="rnn: a bidirectional OwnForward with a forward of"):
        vlrnn.VLRNN(OwnForward(F, H, bidirectional=True, batch_first=True).double(), out)(x, y)
    one_way = nn.LSTM(F, H, batch_first=True).double()
    with pytest.raises(ValueError, match="method: 'bivlrnn' is the block method of "
                                         "bidirectional models"):
        vlrnn.VLRNN(one_way, MlpHead(H, CLASSES).double(), method="bivlrnn")(x, y)
    with pytest.raises(TypeError, match="LSTM bidirectional: expected True or False, got 'yes'"):
        vlrnn.nn.LSTM(F, H, bidirectional="yes")
    with pytest.raises(ValueError, match=r"hx\[0\]: expected shape \[2, 3, 8\] "
                                         r"\[num_layers \* 2, B, H\]"):
        vlrnn.nn.GRU(F, H, bidirectional=True)(torch.zeros(2, 3, F), torch.zeros(1, 3, H))


class Wrapped(nn.Module):
    """A bidirectional nn.LSTM inside a module of the user's own, which says so as torch.nn
    does (bidirectional=True)."""

    def __init__(self):
        super().__init__()
        self.lstm = stock("lstm", 1, torch.float64)
        self.bidirectional = True

    def forward(self, x, h):
        return self.lstm(x, h)


def test_a_bidirectional_module_of_ones_own_is_refused_with_why_and_runs_whole():
    """Before, bivlrnn (picked for bidirectional=True) was refused "for this left-to-right
    rnn", and 'vlrnn', which that pointed to, by the first-call check."""
    x, y = make_batch(False)
    rnn, out = Wrapped(), MlpHead(2 * H, CLASSES).double()
    with pytest.raises(ValueError, match="rnn: Wrapped has bidirectional=True, but only "
                                         "torch.nn's LSTM / GRU .* method='full' runs it"):
        vlrnn.VLRNN(rnn, out)(x, y)
    (loss, want, _), (got_loss, got, _) = full_and_block(rnn, out, x, y, method="full")
    assert max_rel_diff(got, want) < TOLERANCE[torch.float64]
