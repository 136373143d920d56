"""vlrnn.nn.LSTM and vlrnn.nn.GRU are torch.nn.LSTM and torch.nn.GRU, computed by the
hand-written cells: same parameters and state_dict, same outputs and gradients, in one
direction or both."""
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence

import vlrnn
from conftest import CLASSES, MlpHead, grads, max_rel_diff

F, H = 5, 7


def pair(kind, layers, batch_first, bias=True, bidirectional=False):
    ours_cls, theirs_cls = {"lstm": (vlrnn.nn.LSTM, nn.LSTM), "gru": (vlrnn.nn.GRU, nn.GRU)}[kind]
    args = dict(num_layers=layers, batch_first=batch_first, bias=bias,
                bidirectional=bidirectional)
    theirs = theirs_cls(F, H, **args).double()
    ours = ours_cls(F, H, **args).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def states(h):
    return h if isinstance(h, tuple) else (h,)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("layout", ["batch_first", "time_major", "packed", "no_bias"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
def test_same_function_and_gradients_as_torch_nn(kind, layers, layout, bidirectional):
    # Bidirectional: the engine's Bidirectional model, each direction a hand-written cell
    # (the backward one on the '_reverse' parameters, from each sequence's last step).
    torch.manual_seed(0)
    ours, theirs = pair(kind, layers, layout == "batch_first", bias=layout != "no_bias",
                        bidirectional=bidirectional)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    if layout == "packed":
        x = pack_sequence([torch.randn(n, F, dtype=torch.float64) for n in (9, 4, 12, 1)],
                          enforce_sorted=False)
    else:
        x = torch.randn(4, 9, F, dtype=torch.float64)
    results = []
    for module in (ours, theirs):
        module.zero_grad()
        z, h = module(x)
        data = z.data if layout == "packed" else z
        loss = (data ** 2).sum() + sum((s * 1.5).sum() for s in states(h))
        loss.backward()
        results.append(([data, *states(h)], grads([module])))
    (out_ours, g_ours), (out_theirs, g_theirs) = results
    assert max_rel_diff([o.detach() for o in out_ours], [o.detach() for o in out_theirs]) < 1e-12
    assert max_rel_diff(g_ours, g_theirs) < 1e-10


def test_a_trained_lstm_state_dict_loads():
    theirs = nn.LSTM(F, H, num_layers=2)
    ours = vlrnn.nn.LSTM(F, H, num_layers=2)
    ours.load_state_dict(theirs.state_dict())
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_as_the_rnn_of_vlrnn_with_dropout():
    class Lstm(vlrnn.nn.LSTM, vlrnn.RNNModule):
        pass

    torch.manual_seed(2)
    rnn = Lstm(F, H, num_layers=2, dropout=0.3, batch_first=True).double()
    out = MlpHead(H, CLASSES).double()
    x = torch.randn(3, 25, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (3, 25))
    vlrnn.assert_exact(rnn, out, x, y)


def test_unsupported_options_say_so():
    with pytest.raises(ValueError, match="proj_size: not supported"):
        vlrnn.nn.LSTM(F, H, proj_size=2)
    with pytest.raises(ValueError, match="hidden_size: expected an int >= 1, got 0"):
        vlrnn.nn.GRU(F, 0)
    with pytest.raises(ValueError, match="variant: expected 'v1'"):
        vlrnn.nn.GRU(F, H, variant="v9")
    with pytest.raises(ValueError, match="input: expected 5 features per step, got 4"):
        vlrnn.nn.LSTM(F, H)(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"hx\[0\]: expected shape \[1, 3, 7\]"):
        vlrnn.nn.GRU(F, H)(torch.zeros(2, 3, F), torch.zeros(3, 1, H))
