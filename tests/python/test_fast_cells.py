"""An unmodified torch.nn.LSTM / GRU runs by the hand-written cells inside VLRNN (the same
function of its own parameters); anything else is called as it is."""
import pytest
import torch
from torch import nn

import vlrnn
from vlrnn import nn as nn_module
from vlrnn.nn import lstm_runs_on_onednn, stock_engine_model
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
    # float64: torch runs no LSTM on oneDNN there (below), so the cells take a stock one
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


def test_an_lstm_torch_runs_on_onednn_runs_as_itself():
    """On PyTorch 2.x, torch.nn.LSTM in float32 on the CPU runs on oneDNN, faster than the
    hand-written cell (docs/platforms.md): the engine calls the module there, and the cells
    elsewhere (1.13, float64). The GRU has no oneDNN path and keeps the cells."""
    onednn = lstm_runs_on_onednn(torch.float32, "cpu")
    assert onednn == (int(torch.__version__.split(".")[0]) >= 2
                      and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)
    assert not lstm_runs_on_onednn(torch.float64, "cpu")
    assert (stock_engine_model(nn.LSTM(F, H, batch_first=True)) is None) == onednn
    assert stock_engine_model(nn.GRU(F, H, batch_first=True)) is not None
    rng = torch.get_rng_state()
    nn_module._onednn_lstm.clear()  # seen anew: draws nothing
    lstm_runs_on_onednn(torch.float32, "cpu")
    assert torch.equal(torch.get_rng_state(), rng)
