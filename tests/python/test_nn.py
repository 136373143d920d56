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


class OwnForwardLstm(vlrnn.nn.LSTM):
    def forward(self, input, hx=None):
        return super().forward(input, hx)


def test_vlrnn_runs_the_cells_model_unless_only_a_call_computes_the_module():
    # The engine runs the cells' C++ model, with no Python per block, wherever that is the
    # module's own function; elsewhere it calls the module per block, or, for a bidirectional
    # module (which no call per block computes), refuses naming why.
    rnn = vlrnn.nn.LSTM(F, H, num_layers=2, dropout=0.3, batch_first=True).double()
    assert rnn.engine_model() is None  # training: a PackedSequence's masks need its calls
    assert isinstance(rnn.eval().engine_model().model, vlrnn._C.BlockRnn)
    assert isinstance(vlrnn.nn.GRU(F, H, bias=False).engine_model().model, vlrnn._C.BlockRnn)
    assert OwnForwardLstm(F, H).engine_model() is None
    hooked = vlrnn.nn.GRU(F, H)
    hooked.register_forward_hook(lambda *args: None)
    assert hooked.engine_model() is None
    for module in (OwnForwardLstm(F, H, bidirectional=True),
                   vlrnn.nn.GRU(F, H, bidirectional=True)):
        module.register_forward_hook(lambda *args: None)
        with pytest.raises(ValueError, match="bidirectional .* cannot compute this one's "
                                             "function: (a forward of its own|forward hooks)"):
            module.engine_model()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_as_the_rnn_of_vlrnn_run_by_the_engine_or_called(kind):
    # Without dropout the engine runs the cells' model; hooked, VLRNN calls the module per
    # block: both exact, packed sequences of several lengths included.
    torch.manual_seed(3)
    make = {"lstm": vlrnn.nn.LSTM, "gru": vlrnn.nn.GRU}[kind]
    out = MlpHead(H, CLASSES).double()
    x = pack_sequence([torch.randn(n, F, dtype=torch.float64) for n in (13, 5, 21)],
                      enforce_sorted=False)
    y = pack_sequence([torch.randint(0, CLASSES, (n,)) for n in (13, 5, 21)],
                      enforce_sorted=False)
    for hooked in (False, True):
        rnn = make(F, H, num_layers=2, batch_first=True, bias=kind == "lstm").double()
        if hooked:
            rnn.register_forward_hook(lambda *args: None)
        vlrnn.assert_exact(rnn, out, x, y)


@pytest.mark.parametrize("make", [
    lambda: vlrnn.nn.GRU(F, H, num_layers=2, batch_first=True),
    lambda: vlrnn.nn.MinGRU(F, H, num_layers=2, batch_first=True),
    lambda: nn.LSTM(F, H, batch_first=True, bidirectional=True),
], ids=["gru", "mingru", "bidirectional_lstm"])
def test_an_initial_state_computed_from_parameters_gets_its_gradient(make):
    # The engine runs these as C++ models, on h0 taken as new leaves: dL/dh0 must still
    # flow back through the graph that computed h0 (a learned initial state).
    torch.manual_seed(4)
    rnn = make().double()
    directions = 2 if rnn.bidirectional else 1
    out = MlpHead(directions * H, CLASSES).double()
    initial = torch.randn(rnn.num_layers * directions, 1, H, dtype=torch.float64,
                          requires_grad=True)
    x = torch.randn(3, 11, F, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (3, 11))
    found = []
    for model in (vlrnn.PlainRNN(rnn, out), vlrnn.VLRNN(rnn, out, "MEAN", N=3)):
        initial.grad = None
        state = torch.tanh(initial).expand(-1, 3, -1)
        h0 = (state, state * 0.5) if isinstance(rnn, nn.LSTM) else state
        loss = model(x, y, h0)[0]
        if loss.requires_grad:  # PlainRNN: the caller back-propagates
            loss.backward()
        found.append(initial.grad.clone())
    assert found[0].abs().max() > 0
    assert max_rel_diff([found[1]], [found[0]]) < 1e-10
