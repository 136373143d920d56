"""grad_scaler= on VLRNN.forward: the gradients of a mixed-precision loop's scaled loss, as
scaler.scale(loss).backward() leaves them, so that scaler.step() and scaler.update() follow
(NOTE [ Loss scale ] in vlrnn/methods/gradient_method.h). Against PlainRNN with the same
scaler, in float64 to 1e-10; a scale of 384, not a power of two, so that a factor missed or
applied twice cannot cancel. torch.amp.GradScaler runs on the CPU from 2.3 on; before, only
a disabled scaler is possible here. The problems are test_grad_h.py's."""
import warnings

import pytest
import torch

import vlrnn
from vlrnn import _compat
from conftest import CPU_GRAD_SCALER, leaves, worst, zero
from test_grad_h import gradients, problem  # the same modules and batches

SCALE = 384.0
needs_cpu_scaler = pytest.mark.skipif(not CPU_GRAD_SCALER,
                                      reason="torch.amp.GradScaler on the CPU needs torch 2.3+")


def scaler(enabled=True):
    if CPU_GRAD_SCALER:
        return torch.amp.GradScaler("cpu", init_scale=SCALE, enabled=enabled)
    return torch.cuda.amp.GradScaler(init_scale=SCALE, enabled=enabled)


@needs_cpu_scaler
@pytest.mark.parametrize("variable", [False, True], ids=["fixed", "packed"])
@pytest.mark.parametrize("kind,method",
                         [(k, m) for k in ["nn.LSTM", "python GRU", "vlrnn.nn.MinGRU"]
                          for m in ["vlrnn:block_length=2", "checkpoint:segments=3",
                                    "planner:percent=30"]]
                         + [("bidirectional nn.LSTM", "bivlrnn:block_length=3")])
def test_gradients_and_the_step_are_those_of_a_scaled_backward(kind, method, variable):
    rnn, out, x, y, h0, _ = problem(kind, variable)
    zero(rnn, out)
    reference, reference_h0 = scaler(), leaves(h0)
    want_loss = vlrnn.PlainRNN(rnn, out, "SUM")(x, y, reference_h0)[0]
    reference.scale(want_loss).backward()
    want = gradients((rnn, out), reference_h0)

    zero(rnn, out)
    used, got_h0 = scaler(), leaves(h0)
    loss = vlrnn.VLRNN(rnn, out, "SUM", method=method)(x, y, got_h0, grad_scaler=used)[0]
    got = gradients((rnn, out), got_h0)
    assert worst(got, want) < 1e-10
    assert abs(loss.item() - want_loss.item()) <= 1e-12 * abs(want_loss.item())
    # The scale was applied once: unscaled, these are the loss's own gradients.
    zero(rnn, out)
    plain_h0 = leaves(h0)
    vlrnn.VLRNN(rnn, out, "SUM", method=method)(x, y, plain_h0)
    assert worst([g / SCALE for g in got], gradients((rnn, out), plain_h0)) < 1e-10

    # The scaler steps on them as on its own: unscaled, checked finite, applied.
    for p, g in zip([p for m in (rnn, out) for p in m.parameters()], got):
        p.grad = g.clone()
    before = [p.detach().clone() for m in (rnn, out) for p in m.parameters()]
    optimizer = torch.optim.SGD([p for m in (rnn, out) for p in m.parameters()], lr=0.1)
    used.step(optimizer)
    used.update()
    after = [p.detach() for m in (rnn, out) for p in m.parameters()]
    steps = [(b - a) / 0.1 for a, b in zip(after, before)]
    # The scaler unscales by 1 / scale rounded to float32 (1 / 384 is not exact there).
    inverse = torch.tensor(1.0 / SCALE, dtype=torch.float32).item()
    assert worst(steps, [w * inverse for w in want[:len(steps)]]) < 1e-10


@needs_cpu_scaler
@pytest.mark.parametrize("kind", ["nn.LSTM", "python GRU"])
def test_a_stream_cut_into_calls_takes_grad_h_as_given(kind):
    # Each call's h0.grad is already scaled: handed on as grad_h, it is not scaled again.
    rnn, out, x, y, h0, _ = problem(kind, variable=False)
    zero(rnn, out)
    whole_h0 = leaves(h0)
    vlrnn.VLRNN(rnn, out, "SUM", N=3)(x, y, whole_h0, grad_scaler=scaler())
    want = gradients((rnn, out), whole_h0)

    zero(rnn, out)
    model, cut = vlrnn.VLRNN(rnn, out, "SUM", N=2), 4
    with torch.no_grad():
        middle = model(x[:, :cut], y[:, :cut], h0)[2]
    second_h0 = leaves(middle)
    model(x[:, cut:], y[:, cut:], second_h0, grad_scaler=scaler())
    first_h0 = leaves(h0)
    handed = (tuple(t.grad for t in second_h0) if isinstance(second_h0, tuple)
              else second_h0.grad)
    model(x[:, :cut], y[:, :cut], first_h0, grad_scaler=scaler(), grad_h=handed)
    assert worst(gradients((rnn, out), first_h0), want) < 1e-10


def test_a_disabled_grad_scaler_changes_nothing():
    rnn, out, x, y, h0, _ = problem("nn.LSTM", variable=False)
    model = vlrnn.VLRNN(rnn, out, "SUM", N=3)
    zero(rnn, out)
    model(x, y, h0)
    want = gradients((rnn, out), ())
    zero(rnn, out)
    model(x, y, h0, grad_scaler=scaler(enabled=False))
    assert worst(gradients((rnn, out), ()), want) == 0.0


def test_grad_scaler_must_be_a_grad_scaler():
    rnn, out, x, y, _, _ = problem("nn.LSTM", variable=False)
    with pytest.raises(TypeError, match=r"grad_scaler: expected None or a "
                                        r"torch\.amp\.GradScaler .*got float"):
        vlrnn.VLRNN(rnn, out, "SUM")(x, y, grad_scaler=SCALE)


def float16_autocast_on_the_cpu():
    try:
        with torch.autocast("cpu", dtype=torch.float16):
            return _compat.autocast_dtype() == torch.float16
    except (RuntimeError, AssertionError):
        return False


@pytest.mark.skipif(not CPU_GRAD_SCALER or not float16_autocast_on_the_cpu(),
                    reason="float16 autocast on the CPU needs torch 2.x")
def test_float16_autocast_without_a_grad_scaler_warns_and_with_one_does_not():
    rnn, out, x, y, _, _ = problem("nn.GRU", variable=False)
    rnn.float(), out.float()
    model = vlrnn.VLRNN(rnn, out, "SUM", N=3)
    with torch.autocast("cpu", dtype=torch.float16):
        with pytest.warns(RuntimeWarning, match="float16 under torch.autocast without "
                                                "grad_scaler="):
            model(x.float(), y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model(x.float(), y, grad_scaler=scaler())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(x.float(), y)  # no autocast: nothing to say
