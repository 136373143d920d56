"""Every exact gradient method, called from Python on Python modules (dropout included),
matches full BPTT at 1e-10 in float64."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import F, H, CLASSES, GRU, MlpHead, grads, make_batch, make_rnn, max_rel_diff

EXACT_SPECS = ["full", "vlrnn", "vlrnn:block_length=1", "vlrnn:block_length=7", "checkpoint",
               "checkpoint:segments=3", "revolve", "revolve:slots=2", "planner:percent=20",
               "planner:percent=5", "online", "online:slots=2"]


class StepDropoutCell(vlrnn.RNNModule):
    """An Elman cell looping over steps, with a dropout mask drawn per step: exact under
    any cut on any generator."""

    def __init__(self, n_in, n_hidden, p=0.3):
        super().__init__()
        self.cell = nn.RNNCell(n_in, n_hidden)
        self.drop = nn.Dropout(p)

    def forward(self, x, h):
        h = torch.zeros(1, x.shape[0], self.cell.hidden_size, dtype=x.dtype) if h is None else h
        state, outputs = h[0], []
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state)
            outputs.append(self.drop(state))
        return torch.stack(outputs, 1), state.unsqueeze(0)


def reference(rnn, out, x, y, seed):
    torch.manual_seed(seed)
    for p in (*rnn.parameters(), *out.parameters()):
        p.grad = None
    loss, _, _ = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
    loss.backward()
    return loss.item(), grads([rnn, out])


def by_method(rnn, out, x, y, seed, spec):
    torch.manual_seed(seed)
    for p in (*rnn.parameters(), *out.parameters()):
        p.grad = None
    loss, _, _ = vlrnn.VLRNN(rnn, out, "MEAN")(x, y, method=spec)
    return loss.item(), grads([rnn, out])


@pytest.mark.parametrize("spec", EXACT_SPECS)
@pytest.mark.parametrize("model", ["composite+dropout", "step_dropout", "gru"])
@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_exact_method_matches_full_bptt(spec, model, packed):
    torch.manual_seed(3)
    if model == "composite+dropout":
        rnn = make_rnn("vlrnn_nn_composite", dropout=0.3)
    elif model == "step_dropout":
        if packed:
            pytest.skip("the step loop takes batch-first tensors only")
        rnn = StepDropoutCell(F, H).double()
    else:
        rnn = make_rnn("gru")
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(packed, steps=24)
    loss_ref, g_ref = reference(rnn, out, x, y, seed=11)
    loss, g = by_method(rnn, out, x, y, seed=11, spec=spec)
    assert abs(loss - loss_ref) <= 1e-10 * abs(loss_ref)
    assert max_rel_diff(g, g_ref) < 1e-10, spec


def test_generators_end_where_one_forward_pass_leaves_them():
    rnn, out = make_rnn("vlrnn_nn_composite", dropout=0.3), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=20)
    torch.manual_seed(5)
    vlrnn.PlainRNN(rnn, out)(x, y)
    after_plain = torch.rand(3)
    torch.manual_seed(5)
    vlrnn.VLRNN(rnn, out, N=4)(x, y)
    assert torch.equal(torch.rand(3), after_plain)


def test_truncated_bptt_runs_and_differs():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=24)
    _, g_ref = reference(rnn, out, x, y, seed=0)
    _, g = by_method(rnn, out, x, y, seed=0, spec="tbptt:k=4")
    assert max_rel_diff(g, g_ref) > 1e-6  # an approximation, not exact


def test_methods_lists_the_registry():
    names = vlrnn.methods()
    for name in ("full", "vlrnn", "checkpoint", "tbptt", "revolve", "planner"):
        assert name in names and names[name]


def test_planner_measures_once_for_batches_padded_to_other_lengths(tmp_path, monkeypatch):
    """Batches padded to their longest sequence change T from batch to batch: the planner
    measures its cost model on the first and prices the shorter ones from it, so one model
    file holds them all (it had one per T), and every batch's gradients stay exact."""
    monkeypatch.setenv("VLRNN_CACHE_DIR", str(tmp_path))
    torch.manual_seed(7)
    rnn = GRU(F, 11, batch_first=True).double()  # a shape of its own: none cached yet
    out = MlpHead(11, CLASSES).double()
    for steps, seed in ((40, 1), (29, 2), (33, 3)):
        x, y = make_batch(False, steps=steps, seed=seed)
        loss_ref, g_ref = reference(rnn, out, x, y, seed=seed)
        loss, g = by_method(rnn, out, x, y, seed=seed, spec="planner:percent=30")
        assert abs(loss - loss_ref) <= 1e-10 * abs(loss_ref)
        assert max_rel_diff(g, g_ref) < 1e-10, steps
    files = list((tmp_path / "cost-models").glob("*.txt"))
    assert len(files) == 1, files
    # Measured on the first batch and never again (a measurement rewrites the file).
    steps_line = next(line for line in files[0].read_text().splitlines()
                      if line.startswith("step.forward_seconds "))
    assert steps_line.split()[1] == "40", steps_line[:40]

