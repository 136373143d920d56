"""C++ model kinds, a plugin's included, work from Python: trained with VLRNN on the C++
module's own tensors, verified exact; what cannot work is refused by name."""
import os

import pytest
import torch

import vlrnn
from conftest import CLASSES, F, H, MlpHead, grads, make_batch, max_rel_diff

PLUGIN = os.environ.get("VLRNN_TEST_PLUGIN")


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_a_built_in_kind_matches_full_bptt(packed):
    torch.manual_seed(0)
    rnn = vlrnn.CppModel("lstm_block", F, H, num_layers=2, dtype=torch.float64)
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(packed)
    loss_ref, _, _ = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
    loss_ref.backward()
    g_ref = grads([rnn, out])
    assert len(g_ref) == 8 + 4 and all(g is not None for g in g_ref)
    rnn.zero_grad(), out.zero_grad()
    vlrnn.VLRNN(rnn, out, "MEAN", N=3)(x, y)
    assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-10
    vlrnn.assert_exact(rnn, out, x, y)


@pytest.mark.parametrize("kind", ["mingru", "minlstm", "lru", "ssm"])
def test_the_linear_recurrences_match_full_bptt(kind):
    # The in-block scan kinds (vlrnn/cells/linear_recurrence.h), stacked, on a packed batch.
    torch.manual_seed(0)
    rnn = vlrnn.CppModel(kind, F, H, num_layers=2, dtype=torch.float64)
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(True)
    loss_ref, _, _ = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
    loss_ref.backward()
    g_ref = grads([rnn, out])
    assert all(g is not None for g in g_ref)
    rnn.zero_grad(), out.zero_grad()
    vlrnn.VLRNN(rnn, out, "MEAN", N=3)(x, y)
    assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-10


def test_an_optimizer_steps_the_cpp_modules_own_tensors():
    rnn = vlrnn.CppModel("gru", F, H, dtype=torch.float64)
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    before = [t.clone() for _, t in rnn.cpp.named_parameters()]
    optimizer = torch.optim.SGD(list(rnn.parameters()) + list(out.parameters()), lr=0.1)
    vlrnn.VLRNN(rnn, out, N=2)(x, y)
    optimizer.step()
    after = [t for _, t in rnn.cpp.named_parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(after, before))
    assert list(rnn.state_dict()) == ["gru_weight_ih_l0", "gru_weight_hh_l0",
                                      "gru_bias_ih_l0", "gru_bias_hh_l0"]


@pytest.mark.skipif(not PLUGIN, reason="VLRNN_TEST_PLUGIN (the indrnn example plugin) not set")
def test_a_plugins_kind_trains_and_verifies():
    vlrnn.load_plugin(PLUGIN)
    vlrnn.load_plugin(PLUGIN)  # a second load is a no-op
    assert "indrnn" in vlrnn.model_kinds()
    rnn = vlrnn.CppModel("indrnn", F, H, dtype=torch.float64)
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(True)
    vlrnn.assert_exact(rnn, out, x, y, methods=["vlrnn:num_blocks=4", "checkpoint"])


def test_what_cannot_work_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="unknown kind \"nosuch\"; known kinds: rnn"):
        vlrnn.CppModel("nosuch", F, H)
    with pytest.raises(ValueError, match="does not exist"):
        vlrnn.load_plugin(tmp_path / "missing.so")
    rnn = vlrnn.CppModel("rnn", F, H)
    with pytest.raises(TypeError, match="dtype: expected torch.float32 or torch.float64, got "
                                        "torch.float16"):
        rnn.half()
    rnn.double()  # the C++ module converts its own tensors, in place
    assert all(p.dtype == torch.float64 for p in rnn.parameters())
    assert all(t.dtype == torch.float64 for _, t in rnn.cpp.named_parameters())
    with pytest.raises(TypeError, match="dtype: expected torch.float32 or torch.float64"):
        vlrnn.CppModel("rnn", F, H, dtype=torch.float16)
