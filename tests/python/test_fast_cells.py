"""An unmodified torch.nn.LSTM / GRU runs by the hand-written cells inside VLRNN (the same
function of its own parameters); anything else is called as it is."""
import pytest
import torch
from torch import nn

import vlrnn
from vlrnn.nn import stock_engine_block
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff


class Lstm(nn.LSTM, vlrnn.RNNModule):
    pass


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
    assert stock_engine_block(rnn) is not None
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
    assert stock_engine_block(Lstm(F, H, batch_first=True)) is not None
    assert stock_engine_block(nn.LSTM(F, H)) is None  # batch_first=False
    assert stock_engine_block(OwnForward(F, H, batch_first=True)) is None
    assert stock_engine_block(nn.LSTM(F, H, batch_first=True, bidirectional=True)) is None
    dropped = nn.LSTM(F, H, num_layers=2, dropout=0.3, batch_first=True)
    assert stock_engine_block(dropped) is None  # torch.nn draws those masks per call
    assert stock_engine_block(dropped.eval()) is not None
    hooked = nn.GRU(F, H, batch_first=True)
    hooked.register_forward_hook(lambda *args: None)
    assert stock_engine_block(hooked) is None


def test_fast_cells_must_be_a_bool():
    with pytest.raises(TypeError, match="fast_cells: expected True or False, got 'yes'"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True), MlpHead(H, CLASSES), fast_cells="yes")
