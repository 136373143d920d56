"""vlrnn.Stream (python/vlrnn/stream.py): a stream pushed chunk by chunk equals PlainRNN's
loss.backward() on the whole stream at 1e-10 in float64 (parameters, h0, x, dropout drawn
per step included); push/finish and an iterator of chunks; a stream of 1 step and one that
ends at a slot boundary; its states within the slots; the errors a caller can meet; the
'online' method in the registry; and examples/python/online_stream.py."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import vlrnn
from conftest import CLASSES, CPU_GRAD_SCALER, F, H, MlpHead, TargetHead, grads, make_batch, \
    make_rnn, max_rel_diff
from test_methods import StepDropoutCell

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def chunked(x, y, sizes):
    """(x, y) cut along time into chunks of `sizes` steps."""
    return list(zip(x.split(sizes, dim=1), y.split(sizes, dim=1)))


def plain(rnn, out, x, y, h0, reduction, seed, grad_h=None):
    """PlainRNN's loss.backward() on the whole stream: (loss, loss_seq, h), the gradients
    in .grad."""
    torch.manual_seed(seed)
    loss, loss_seq, h = vlrnn.PlainRNN(rnn, out, reduction)(x, y, h0)
    total = loss if grad_h is None else loss + (h * grad_h).sum()
    total.backward()
    h = tuple(t.detach() for t in h) if isinstance(h, tuple) else h.detach()
    return loss.detach(), loss_seq.detach(), h


def zero_grads(*tensors):
    for t in tensors:
        t.grad = None


@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
@pytest.mark.parametrize("sizes", [[1] * 17, [3, 3, 3, 3, 3, 2], [5, 1, 9, 2], [17]],
                         ids=["ones", "threes", "mixed", "whole"])
@pytest.mark.parametrize("slots", [1, 3])
def test_stream_equals_backward_on_the_whole_stream(reduction, sizes, slots):
    torch.manual_seed(3)
    rnn = StepDropoutCell(F, H).double()  # dropout drawn per step
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=17)
    x.requires_grad_(True)
    h0 = torch.randn(1, x.shape[0], H, dtype=torch.float64, requires_grad=True)
    params = [*rnn.parameters(), *out.parameters()]
    zero_grads(*params, x, h0)
    loss_ref, seq_ref, h_ref = plain(rnn, out, x, y, h0, reduction, seed=8)
    g_ref = grads([rnn, out]) + [x.grad.clone(), h0.grad.clone()]

    zero_grads(*params, x, h0)
    torch.manual_seed(8)
    stream = vlrnn.Stream(rnn, out, reduction, slots=slots, h0=h0)
    for xc, yc in chunked(x, y, sizes):
        stream.push(xc, yc)
        assert stream.held_states <= slots
    loss, loss_seq, h = stream.finish()
    assert stream.steps == 17
    assert abs(loss.item() - loss_ref.item()) <= 1e-10 * abs(loss_ref.item())
    assert max_rel_diff([loss_seq, h], [seq_ref, h_ref]) < 1e-10
    assert max_rel_diff(grads([rnn, out]) + [x.grad, h0.grad], g_ref) < 1e-10


@pytest.mark.parametrize("steps", [1, 5, 6], ids=["one_step", "slots_full", "first_drop"])
def test_a_stream_of_one_step_or_ending_at_a_slot_boundary(steps):
    """slots = 4: after 5 steps the slots have just filled (h0, 3 kept states, the working
    state); after 6 the rule drops its first state."""
    rnn = make_rnn("vlrnn_nn_composite", dropout=0.3)
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=steps)
    params = [*rnn.parameters(), *out.parameters()]
    zero_grads(*params)
    loss_ref, _, _ = plain(rnn, out, x, y, None, "MEAN", seed=4)
    g_ref = grads([rnn, out])
    for sizes in ([1] * steps, [steps]):
        zero_grads(*params)
        torch.manual_seed(4)
        loss, loss_seq, _ = vlrnn.Stream(rnn, out, "MEAN", slots=4).run(chunked(x, y, sizes))
        assert loss_seq.shape == (x.shape[0], steps)
        assert abs(loss.item() - loss_ref.item()) <= 1e-10 * abs(loss_ref.item())
        assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-10, sizes


def test_grad_h_reaches_the_stream():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=12)
    grad_h = torch.randn(1, x.shape[0], H, dtype=torch.float64)
    params = [*rnn.parameters(), *out.parameters()]
    zero_grads(*params)
    plain(rnn, out, x, y, None, "SUM", seed=0, grad_h=grad_h)
    g_ref = grads([rnn, out])
    zero_grads(*params)
    vlrnn.Stream(rnn, out, "SUM", slots=2).run(chunked(x, y, [4, 4, 4]), grad_h=grad_h)
    assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-10


@pytest.mark.skipif(not CPU_GRAD_SCALER,
                    reason="torch.amp.GradScaler on the CPU needs torch 2.3+")
def test_a_grad_scaler_scales_the_loss_not_grad_h():
    # NOTE [ Loss scale ]: scale · loss + <grad_h, h>, the loss returned unscaled.
    scale = 384.0
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=12)
    grad_h = torch.randn(1, x.shape[0], H, dtype=torch.float64)
    params = [*rnn.parameters(), *out.parameters()]
    zero_grads(*params)
    loss_ref, _, h = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
    (scale * loss_ref + (h * grad_h).sum()).backward()
    g_ref = grads([rnn, out])
    zero_grads(*params)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    loss = vlrnn.Stream(rnn, out, "MEAN", slots=2).run(chunked(x, y, [5, 4, 3]), grad_h=grad_h,
                                                       grad_scaler=scaler)[0]
    assert max_rel_diff(grads([rnn, out]), g_ref) < 1e-10
    assert abs(loss.item() - loss_ref.item()) <= 1e-10 * abs(loss_ref.item())


def test_targets_an_encoder_computes_get_their_gradient_once():
    """Each chunk's targets computed by an encoder, trained with the rnn: raised before
    ('Trying to backward through the graph a second time')."""
    rnn, out = make_rnn("gru"), TargetHead(H, F).double()
    encoder = torch.nn.Linear(F, F).double()  # its backward needs its saved input
    calls = []
    encoder.weight.register_hook(lambda grad: calls.append(1) or grad.clamp(-0.1, 0.1))
    x, _ = make_batch(False, steps=12)
    params = [*rnn.parameters(), *out.parameters(), *encoder.parameters()]
    zero_grads(*params)
    plain(rnn, out, x, encoder(x), None, "SUM", seed=0)
    g_ref = [p.grad.clone() for p in params]
    assert len(calls) == 1
    zero_grads(*params)
    stream = vlrnn.Stream(rnn, out, "SUM", slots=2)
    for xc in x.split([5, 4, 3], dim=1):
        stream.push(xc, encoder(xc))
    stream.finish()
    assert max_rel_diff([p.grad for p in params], g_ref) < 1e-10
    assert len(calls) == 2  # once each


def test_x_and_y_from_one_encoder_enter_its_graph_once():
    """Next-step prediction in an encoder's space, chunk by chunk: x = e[:, a:b] and
    y = e[:, a + 1:b + 1] of one encoder output e, shared by neighbouring chunks too."""
    rnn, out = make_rnn("gru"), TargetHead(H, F).double()
    encoder = torch.nn.Linear(F, F).double()
    calls = []
    encoder.weight.register_hook(lambda grad: calls.append(1) or grad.clamp(-0.1, 0.1))
    raw, _ = make_batch(False, steps=13)
    params = [*rnn.parameters(), *out.parameters(), *encoder.parameters()]
    zero_grads(*params)
    e = torch.tanh(encoder(raw))  # [B, 13, F]
    plain(rnn, out, e[:, :-1], e[:, 1:], None, "SUM", seed=0)
    g_ref = [p.grad.clone() for p in params]
    zero_grads(*params)
    e = torch.tanh(encoder(raw))
    stream = vlrnn.Stream(rnn, out, "SUM", slots=2)
    for a, b in ((0, 5), (5, 9), (9, 12)):
        stream.push(e[:, a:b], e[:, a + 1:b + 1])
    stream.finish()
    assert max_rel_diff([p.grad for p in params], g_ref) < 1e-10
    assert len(calls) == 2  # once each


def test_states_stay_within_the_slots_whatever_the_length():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=300)
    stream = vlrnn.Stream(rnn, out, slots=3)
    peak = 0
    for xc, yc in chunked(x, y, 7):
        stream.push(xc, yc)
        peak = max(peak, stream.held_states)
    assert peak == 3
    stream.finish()
    counters = stream.last_counters
    assert counters["forward_with_grad"] == counters["backward"] == 300
    assert counters["forward_no_grad"] > 300  # recomputed, not stored


def test_budget_bytes_sets_the_slots():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=6)
    state_bytes = x.shape[0] * H * 8  # [1, B, H] float64
    stream = vlrnn.Stream(rnn, out, budget_bytes=3 * state_bytes)
    stream.push(x, y)
    assert stream.slots == 3


def test_bad_arguments_are_named():
    rnn, out = make_rnn("gru"), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=6)
    with pytest.raises(ValueError, match="slots: expected an integer >= 1, got 0"):
        vlrnn.Stream(rnn, out, slots=0)
    with pytest.raises(ValueError, match="slots or budget_bytes, not both"):
        vlrnn.Stream(rnn, out, slots=2, budget_bytes=1000)
    with pytest.raises(ValueError, match="loss_scaling"):
        vlrnn.Stream(rnn, out, "MAX")
    stream = vlrnn.Stream(rnn, out)
    with pytest.raises(ValueError, match="finish: no chunk was pushed"):
        stream.finish()
    with pytest.raises(TypeError, match="PackedSequence"):
        stream.push(*make_batch(True, steps=6))
    stream.push(x[:, :3], y[:, :3])
    with pytest.raises(ValueError, match=r"x: expected \[B, n, F\] = \[5, n, 6\]"):
        stream.push(x[:2, 3:], y[:2, 3:])
    with pytest.raises(ValueError, match=r"y: expected leading dimensions \[B, T\]"):
        stream.push(x[:, 3:], y[:, 4:])
    stream.push(x[:, 3:], y[:, 3:])
    stream.finish()
    with pytest.raises(RuntimeError, match="push: the stream has finished"):
        stream.push(x, y)
    with pytest.raises(RuntimeError, match="finish: the stream has finished already"):
        stream.finish()
    with pytest.raises(TypeError, match=r"chunks\[1\]: expected an \(x, y\) pair"):
        vlrnn.Stream(rnn, out).run([(x, y), x])


def test_refuses_generators_moved_between_pushes_under_dropout():
    rnn = StepDropoutCell(F, H).double()
    out = MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=8)
    stream = vlrnn.Stream(rnn, out, slots=2)
    stream.push(x[:, :4], y[:, :4])
    torch.rand(1)  # the caller's own draw from the global generator
    with pytest.raises(RuntimeError, match="generators moved"):
        stream.push(x[:, 4:], y[:, 4:])


def test_online_is_a_method():
    """(Its exactness on whole batches: test_methods.py's EXACT_SPECS.)"""
    assert "online" in vlrnn.methods()
    assert "unknown length" in vlrnn.methods()["online"]


def test_the_example_streams_exactly():
    done = subprocess.run([sys.executable, "online_stream.py"], cwd=EXAMPLES,
                          env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("stream of ") for line in lines), done.stdout
    check = [line for line in lines if "vs loss.backward()" in line]
    assert len(check) == 1 and float(check[0].split()[-1]) < 1e-10, done.stdout
