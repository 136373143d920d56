"""Code written for the original Python VLRNN runs unchanged, and matches full BPTT."""
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

import vlrnn
from conftest import MlpHead, grads, make_batch, make_rnn, max_rel_diff, CLASSES, H


def run_both(rnn, out, x, y, scaling, **call):
    mods = nn.ModuleList([out, rnn])
    mods.zero_grad()
    plain = vlrnn.PlainRNN(rnn, out, loss_scaling=scaling)
    loss_ref, seq_ref, h_ref = plain(x, y, None)
    loss_ref.backward()
    g_ref = grads(mods)
    mods.zero_grad()
    loss, seq, h = vlrnn.VLRNN(rnn, out, scaling)(x, y, None, **call)
    return (loss_ref.detach(), seq_ref.detach() if isinstance(seq_ref, torch.Tensor)
            else seq_ref, h_ref, g_ref), (loss, seq, h, grads(mods))


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("kind", ["composite", "gru", "lstm3"])
@pytest.mark.parametrize("scaling", ["SUM", "MEAN"])
@pytest.mark.parametrize("N", [1, 2, 7, 10])
def test_vlrnn_matches_plain_rnn(kind, packed, scaling, N):
    torch.manual_seed(0)
    rnn, out = make_rnn(kind), MlpHead(H, CLASSES).double()
    x, y = make_batch(packed)
    (loss_ref, seq_ref, h_ref, g_ref), (loss, seq, h, g) = run_both(rnn, out, x, y, scaling, N=N)
    # The original's own check, unchanged ...
    assert all(torch.allclose(a, b) for a, b in zip(g, g_ref))
    # ... and ours: float64 to 1e-10 relative.
    assert max_rel_diff(g, g_ref) < 1e-10
    assert not loss.requires_grad
    assert abs(loss.item() - loss_ref.item()) <= 1e-10 * abs(loss_ref.item())
    if packed:
        assert isinstance(seq, PackedSequence)
        assert torch.equal(seq.batch_sizes, seq_ref.batch_sizes)
        assert torch.equal(seq.sorted_indices, seq_ref.sorted_indices)
        assert torch.allclose(seq.data, seq_ref.data, rtol=1e-10, atol=1e-12)
    else:
        assert seq.shape == seq_ref.shape
        assert torch.allclose(seq, seq_ref, rtol=1e-10, atol=1e-12)
    h_ref = h_ref if isinstance(h_ref, tuple) else (h_ref,)
    h = h if isinstance(h, tuple) else (h,)
    assert len(h) == len(h_ref)
    for a, b in zip(h, h_ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_n_on_the_constructor_and_h0_given():
    rnn, out = make_rnn("lstm3"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    h0 = (torch.randn(3, x.shape[0], H, dtype=torch.float64, requires_grad=True),
          torch.randn(3, x.shape[0], H, dtype=torch.float64, requires_grad=True))
    loss_ref, _, _ = vlrnn.PlainRNN(rnn, out, "SUM")(x, y, h0)
    loss_ref.backward()
    g_ref = [h0[0].grad.clone(), h0[1].grad.clone()] + grads([rnn, out])
    for t in (*h0, *rnn.parameters(), *out.parameters()):
        t.grad = None
    vlrnn.VLRNN(rnn, out, "SUM", N=4)(x, y, h0)
    assert max_rel_diff([h0[0].grad, h0[1].grad] + grads([rnn, out]), g_ref) < 1e-10


def test_gradients_accumulate_like_backward():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=3)
    model(x, y)
    once = grads([rnn, out])
    model(x, y)
    assert max_rel_diff(grads([rnn, out]), [2 * g for g in once]) < 1e-12


def test_input_gradient_reaches_x():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    x.requires_grad_(True)
    loss, _, _ = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
    (dx_ref,) = torch.autograd.grad(loss, x)
    vlrnn.VLRNN(rnn, out, "MEAN", N=5)(x, y)
    assert max_rel_diff([x.grad], [dx_ref]) < 1e-10


def test_float32_within_1e_5():
    rnn, out = make_rnn("lstm3", torch.float32), MlpHead(H, CLASSES)
    x, y = make_batch(True, torch.float32)
    (_, _, _, g_ref), (_, _, _, g) = run_both(rnn, out, x, y, "MEAN", N=7)
    assert max_rel_diff(g, g_ref) < 1e-5


def test_counters_show_one_extra_forward_without_grad():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    model = vlrnn.VLRNN(rnn, out, "SUM", N=5)
    model(x, y)
    steps = x.shape[1]
    assert model.last_counters["forward_with_grad"] == steps
    assert model.last_counters["backward"] == steps
    assert 0 < model.last_counters["forward_no_grad"] <= steps


def test_a_vlrnn_module_copies_and_pickles():
    import copy
    import io
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    model = vlrnn.VLRNN(rnn, out, "SUM", method="planner:percent=50")
    model(x, y)
    twin = copy.deepcopy(model)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)  # a whole module (2.6+ loads weights only)
    for m in (twin, loaded):
        loss, _, _ = m(x, y)
        assert abs(loss.item() - model(x, y)[0].item()) < 1e-12


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
def test_evaluation_computes_the_loss_alone(packed):
    rnn, out = make_rnn("lstm3"), MlpHead(H, CLASSES).double()
    x, y = make_batch(packed)
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=3)
    loss_train, seq_train, _ = model(x, y)
    with torch.no_grad():
        loss, seq, h = model(x, y)
    assert abs(loss.item() - loss_train.item()) < 1e-12
    assert type(seq) is type(seq_train)
    for p in (*rnn.parameters(), *out.parameters()):  # frozen: nothing asks for a gradient
        p.requires_grad_(False)
        p.grad = None
    loss_frozen, _, _ = model(x, y)
    assert abs(loss_frozen.item() - loss_train.item()) < 1e-12
    assert all(p.grad is None for p in (*rnn.parameters(), *out.parameters()))


@pytest.mark.parametrize("packed", [False, True], ids=["FIXED", "PACKED"])
@pytest.mark.parametrize("kind", ["gru", "composite"])
def test_a_batch_made_under_inference_mode_trains_exactly(kind, packed):
    """x, y and h0 made under torch.inference_mode() (a loader's preprocessing): torch
    autograd neither saves such tensors nor counts their versions, which a module called
    per block needs; the call takes normal copies (composite: the module's own forward)."""
    torch.manual_seed(0)
    rnn, out = make_rnn(kind), MlpHead(H, CLASSES).double()
    modules = nn.ModuleList([rnn, out])
    shape = (1, 5, H) if kind == "gru" else None  # conftest's B = 5

    def h0():
        return None if shape is None else \
            torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x, y = make_batch(packed)
    vlrnn.PlainRNN(rnn, out, "MEAN")(x, y, h0())[0].backward()
    want = grads(modules)
    modules.zero_grad()
    with torch.inference_mode():
        x, y, start = *make_batch(packed), h0()
    vlrnn.VLRNN(rnn, out, "MEAN")(x, y, start, N=4)
    assert max_rel_diff(grads(modules), want) < 1e-10
