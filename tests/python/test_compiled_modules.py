"""torch.compile'd modules (PyTorch 2.x): VLRNN calls a compiled rnn as it calls any module,
with full BPTT's gradients. Random numbers are the exception: inductor draws them its own
way, per compiled graph, so a compiled module that draws them is exact only with
torch._inductor.config.fallback_random (eager PyTorch's draws), and refused without it, the
refusal saying so."""
import warnings

import pytest
import torch
from torch import nn

import vlrnn
from conftest import CellLoop, CrossEntropyHead, grads, max_rel_diff

pytestmark = pytest.mark.skipif(not hasattr(torch, "compile"),
                                reason="torch.compile needs torch 2.x")

# Few steps and one block length: inductor compiles each shape and grad mode anew (seconds
# each), and dynamic=False keeps it from compiling a graph for any length as well.
B, T, F, H, CLASSES = 3, 4, 3, 4, 3
METHOD = "vlrnn:block_length=2"


class DropoutCellLoop(CellLoop):
    """A GRUCell looped over the steps with dropout on each new state: one mask per step,
    exact under any cut when eager."""

    def step(self, h):
        return nn.functional.dropout(h, 0.3, self.training)


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Each test compiles from nothing; torch._dynamo is only imported where it exists."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def batch():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, T, F, dtype=torch.float64, generator=g),
            torch.randint(0, CLASSES, (B, T), generator=g))


def modules(rnn):
    torch.manual_seed(0)
    return rnn.double(), CrossEntropyHead(H, CLASSES).double()


def gradients(model, rnn, out, method, seed=1):
    """The gradients of rnn and out after model (eager or compiled) runs with `method`."""
    x, y = batch()
    both = nn.ModuleList([rnn, out])
    both.zero_grad()
    torch.manual_seed(seed)
    if method == "eager":
        vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0].backward()
    else:
        vlrnn.VLRNN(model, out, "SUM", method=method)(x, y)
    return grads(both)


def test_a_compiled_rnn_gets_eager_full_bptts_gradients():
    rnn, out = modules(nn.GRU(F, H, batch_first=True))  # compiled loops: the tests below
    want = gradients(rnn, rnn, out, "eager")
    got = gradients(torch.compile(rnn, dynamic=False), rnn, out, METHOD)
    assert max_rel_diff(got, want) < 1e-10


def test_compiled_dropout_drawn_as_eager_is_exact(monkeypatch):
    monkeypatch.setattr(torch._inductor.config, "fallback_random", True)
    rnn, out = modules(DropoutCellLoop(nn.GRUCell(F, H)))
    want = gradients(rnn, rnn, out, "eager")
    got = gradients(torch.compile(rnn, dynamic=False), rnn, out, METHOD)
    assert max_rel_diff(got, want) < 1e-10


def test_compiled_dropout_drawn_by_inductor_is_refused_with_the_fix():
    import torch._inductor.config
    assert not torch._inductor.config.fallback_random  # torch's default
    rnn, out = modules(DropoutCellLoop(nn.GRUCell(F, H)))
    with pytest.raises(ValueError) as raised:
        gradients(torch.compile(rnn, dynamic=False), rnn, out, METHOD)
    assert "refused, its gradient would not be exact" in str(raised.value)
    assert "torch._inductor.config.fallback_random = True" in str(raised.value)
    assert all(p.grad is None for p in rnn.parameters())


def test_a_model_compiled_whole_runs_vlrnn_untraced():
    """NOTE [ The engine runs untraced ] (_compat.py): compiled whole, a model with VLRNN
    inside runs it as it stands (dynamo broke it into graphs at each call into _C, with a
    warning for each), and still gets full BPTT's gradients."""
    rnn, out = modules(nn.GRU(F, H, batch_first=True))
    want = gradients(rnn, rnn, out, "eager")
    x, y = batch()
    nn.ModuleList([rnn, out]).zero_grad()
    model = torch.compile(vlrnn.VLRNN(rnn, out, "SUM", method=METHOD), dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(x, y)
    assert [str(w.message) for w in caught if "Graph break" in str(w.message)] == []
    assert max_rel_diff(grads(nn.ModuleList([rnn, out])), want) < 1e-10


def test_a_compiled_rnn_inside_a_model_compiled_whole_stays_compiled():
    """The user's own compiled module is still compiled within VLRNN: the refusal of
    inductor's dropout shows it."""
    rnn, out = modules(DropoutCellLoop(nn.GRUCell(F, H)))
    x, y = batch()
    model = torch.compile(vlrnn.VLRNN(torch.compile(rnn, dynamic=False), out, "SUM",
                                      method=METHOD))
    with pytest.raises(ValueError, match="fallback_random = True"):
        model(x, y)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["left-to-right", "bidirectional"])
def test_a_compiled_stock_lstm_runs_as_the_cells_exactly(bidirectional):
    """Compiling changes how nn.LSTM runs, not its function: the engine looks through the
    wrapper to the cells (no Python call per block), and a bidirectional one runs at all
    (its output at t depends on every step: no call per block computes it)."""
    lstm = nn.LSTM(F, H // 2 if bidirectional else H, batch_first=True,
                   bidirectional=bidirectional)
    rnn, out = modules(lstm)
    compiled = torch.compile(rnn, dynamic=False)
    assert vlrnn._engine.engine_model_of(compiled, fast_cells=True) is not None
    want = gradients(rnn, rnn, out, "eager")
    method = "bivlrnn:block_length=2" if bidirectional else METHOD
    assert max_rel_diff(gradients(compiled, rnn, out, method), want) < 1e-10


def test_a_hook_on_the_compiled_wrapper_keeps_it_called():
    rnn, _ = modules(nn.LSTM(F, H, batch_first=True))
    compiled = torch.compile(rnn, dynamic=False)
    compiled.register_forward_hook(lambda module, args, result: result)
    assert vlrnn._engine.engine_model_of(compiled, fast_cells=True) is None
