"""An unmodified torch.nn.LSTM / GRU runs by the hand-written cells inside VLRNN (the same
function of its own parameters); anything else is called as it is."""
import pytest
import torch
from torch import nn

import vlrnn
from vlrnn import nn as nn_module
from vlrnn.nn import stock_engine_model
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff


class Lstm(nn.LSTM, vlrnn.RNNModule):
    pass


class Doubled(nn.Module):
    def forward(self, weight):
        return 2 * weight


class OwnForward(nn.GRU):
    def forward(self, x, h=None):
        return super().forward(x, h)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_fast_cells_give_the_modules_own_gradients(kind, packed):
    torch.manual_seed(0)
    module = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
    rnn = module(F, H, num_layers=2, batch_first=True).double()
    out = MlpHead(H, CLASSES).double()
    assert stock_engine_model(rnn) is not None
    x, y = make_batch(packed)
    results = []
    for fast in (False, True):
        rnn.zero_grad(), out.zero_grad()
        loss, seq, h = vlrnn.VLRNN(rnn, out, "MEAN", N=4, fast_cells=fast)(x, y)
        results.append((loss, grads([rnn, out]), h))
    (loss_slow, g_slow, h_slow), (loss_fast, g_fast, h_fast) = results
    assert abs(loss_fast.item() - loss_slow.item()) < 1e-12
    assert max_rel_diff(g_fast, g_slow) < 1e-10
    h_slow = h_slow if isinstance(h_slow, tuple) else (h_slow,)
    h_fast = h_fast if isinstance(h_fast, tuple) else (h_fast,)
    assert max_rel_diff(list(h_fast), list(h_slow)) < 1e-12


def test_only_a_stock_module_takes_the_fast_path():
    assert stock_engine_model(Lstm(F, H, batch_first=True).double()) is not None
    assert stock_engine_model(nn.LSTM(F, H).double()) is None  # batch_first=False
    assert stock_engine_model(OwnForward(F, H, batch_first=True).double()) is None
    both_ways = stock_engine_model(nn.LSTM(F, H, batch_first=True, bidirectional=True))
    assert isinstance(both_ways.model, vlrnn._C.Bidirectional)
    dropped = nn.LSTM(F, H, num_layers=2, dropout=0.3, batch_first=True).double()
    assert stock_engine_model(dropped) is None  # torch.nn draws those masks per call
    assert stock_engine_model(dropped.eval()) is not None
    hooked = nn.GRU(F, H, batch_first=True)
    hooked.register_forward_hook(lambda *args: None)
    assert stock_engine_model(hooked) is None
    parametrized = nn.GRU(F, H, batch_first=True).double()
    torch.nn.utils.parametrize.register_parametrization(parametrized, "weight_hh_l0", Doubled())
    assert stock_engine_model(parametrized) is None  # computed weights: the module is called


def test_fast_cells_must_be_a_bool():
    with pytest.raises(TypeError, match="fast_cells: expected True or False, got 'yes'"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True), MlpHead(H, CLASSES), fast_cells="yes")


def ran_on_onednn(run):
    with torch.autograd.profiler.profile() as prof:
        run()
    return any(e.name == "aten::mkldnn_rnn_layer" for e in prof.function_events)


def test_an_lstm_runs_on_onednn_where_torch_runs_its_own_there():
    """Where torch runs nn.LSTM on oneDNN's primitive (float32 on 2.x's CPU), the cells run
    on it too, forward and backward: vlrnn.nn.LSTM and a stock nn.LSTM's engine model; never
    in float64, nor with torch's oneDNN switch off (docs/platforms.md)."""
    # Not where oneDNN's no-grad pass computes another function than its training pass
    # (NOTE [ oneDNN's LSTM inference, checked ]): the probe then turns oneDNN off for the
    # process, torch's own nn.LSTM included.
    agrees = vlrnn._C.onednn_lstm_inference_agrees()
    x = torch.randn(2, 5, F)
    stock = nn.LSTM(F, H, batch_first=True)
    onednn = ran_on_onednn(lambda: stock(x))
    version = tuple(int(v) for v in torch.__version__.split(".")[:2])
    assert onednn == (version >= (2, 1) and torch.backends.mkldnn.is_available() and agrees)
    ours = nn_module.LSTM(F, H, batch_first=True)
    assert ran_on_onednn(lambda: ours(x)[0].sum().backward()) == onednn
    assert stock_engine_model(stock) is not None
    loss = lambda: vlrnn.VLRNN(stock, MlpHead(H, CLASSES), N=2)(x, torch.zeros(2, 5).long())
    assert ran_on_onednn(loss) == onednn
    assert not ran_on_onednn(lambda: ours.double()(x.double()))
    with torch.backends.mkldnn.flags(enabled=False):
        assert not ran_on_onednn(lambda: ours.float()(x))


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("module", [nn.LSTM, nn_module.LSTM], ids=["torch", "vlrnn_nn"])
def test_float32_gradients_equal_full_bptt(module, packed):
    """In float32 the cells run on oneDNN's layer where torch has it (2.x): VLRNN's gradients
    equal full BPTT's (PlainRNN) to float32's tolerance, two layers, per-step dropout between
    them for vlrnn.nn's, lengths that end inside blocks."""
    torch.manual_seed(0)
    dropout = 0.3 if module is nn_module.LSTM else 0.0
    rnn = module(F, H, num_layers=2, dropout=dropout, batch_first=True)
    out = MlpHead(H, CLASSES)
    x, y = make_batch(packed, dtype=torch.float32)
    found = []
    for model in (vlrnn.PlainRNN(rnn, out, "MEAN"), vlrnn.VLRNN(rnn, out, "MEAN", N=4)):
        rnn.zero_grad(), out.zero_grad()
        torch.manual_seed(5)  # the same dropout masks
        loss = model(x, y)[0]
        if loss.requires_grad:  # PlainRNN: the caller back-propagates
            loss.backward()
        found.append(grads([rnn, out]))
    assert max_rel_diff(found[1], found[0]) < 1e-5
