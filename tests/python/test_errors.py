"""Bad input raises TypeError / ValueError naming the argument; a user's exception reaches
the caller unchanged with every .grad as it was; Ctrl-C interrupts a long call."""
import os
import signal
import sys
import threading
import time

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence

import vlrnn
from conftest import B, F, H, CLASSES, MlpHead, make_batch, make_rnn


@pytest.fixture
def setup():
    return make_rnn("lstm3"), MlpHead(H, CLASSES).double(), *make_batch(False)


def call(rnn, out, x, y, h0=None, check_cuts=True, **kwargs):
    return vlrnn.VLRNN(rnn, out, "MEAN", check_cuts=check_cuts)(x, y, h0, **kwargs)


@pytest.mark.parametrize("bad, error, words", [
    (dict(x=[1, 2, 3]), TypeError, ["x", "PackedSequence", "list"]),
    (dict(x="rank2"), ValueError, ["x", "[B, T, F]", "[5, 30]"]),
    (dict(x="int"), TypeError, ["x", "floating", "int64"]),
    (dict(y="short"), ValueError, ["y", "[5, 30]", "[5, 29]"]),
    (dict(y=None), TypeError, ["y", "NoneType"]),
    (dict(h0="batch_first"), ValueError, ["h0[0]", "[3, 5, 8]", "[5, 3, 8]"]),
    (dict(h0="one_tensor"), ValueError, ["h0", "2 tensor", "got 1"]),
    (dict(h0="float32"), TypeError, ["h0[0]", "float64", "float32"]),
    (dict(N=0), ValueError, ["N", ">= 1", "0"]),
    (dict(N="4"), TypeError, ["N", "str"]),
    (dict(N=2, method="vlrnn"), ValueError, ["N", "method", "not both"]),
    (dict(method="fastest"), ValueError, ["fastest", "vlrnn", "planner"]),
    (dict(method="vlrnn:block_length=0"), ValueError, ["block", ">= 1", "0"]),
    (dict(method=3), TypeError, ["method", "int"]),
])
def test_bad_arguments_name_what_was_expected(setup, bad, error, words):
    rnn, out, x, y = setup
    h0 = None
    kwargs = {k: v for k, v in bad.items() if k in ("N", "method")}
    if "x" in bad:
        x = {"rank2": x[:, :, 0], "int": x.long()}[bad["x"]] if isinstance(bad["x"], str) \
            else bad["x"]
    if "y" in bad:
        y = y[:, :-1] if bad["y"] == "short" else bad["y"]
    if "h0" in bad:
        shape = {"batch_first": (B, 3, H)}.get(bad["h0"], (3, B, H))
        dtype = torch.float32 if bad["h0"] == "float32" else torch.float64
        h0 = torch.zeros(shape, dtype=dtype)
        h0 = h0 if bad["h0"] == "one_tensor" else (h0, h0.clone())
    with pytest.raises(error) as raised:
        call(rnn, out, x, y, h0, **kwargs)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_constructor_arguments_are_checked(setup):
    rnn, out, _, _ = setup
    with pytest.raises(ValueError, match="loss_scaling.*'MEAN' or 'SUM'.*'AVG'"):
        vlrnn.VLRNN(rnn, out, "AVG")
    with pytest.raises(TypeError, match="rnn: expected a torch.nn.Module, got function"):
        vlrnn.VLRNN(lambda x, h: (x, h), out)
    with pytest.raises(TypeError, match="out: expected a torch.nn.Module"):
        vlrnn.VLRNN(rnn, "ce")


def test_packed_x_needs_packed_y_with_the_same_lengths(setup):
    rnn, out, _, _ = setup
    x, y = make_batch(True)
    with pytest.raises(TypeError, match="y: expected a PackedSequence like x, got Tensor"):
        call(rnn, out, x, torch.zeros(3))
    other = pack_sequence([torch.zeros(2, dtype=torch.long)] * B, enforce_sorted=False)
    with pytest.raises(ValueError, match="y: expected the lengths of x"):
        call(rnn, out, x, other)


def test_dtype_mismatch_names_the_parameter(setup):
    rnn, out, x, y = setup
    with pytest.raises(ValueError, match=r"rnn parameter weight_ih_l0: dtype torch.float32 "
                                         r"differs from x's torch.float64"):
        call(rnn.float(), out, x, y)


class WrongZ(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.gru, self.mode = nn.GRU(F, H, batch_first=True).double(), mode

    def forward(self, x, h):
        if self.mode == "state_grows":  # one layer more than given: the probe learns
            z, last = self.gru(x, None if h is None else h[-1:])  # [2, B, H], and the
            return z, torch.cat([last if h is None else h, last])  # first block gets 3
        z, h = self.gru(x, h)
        if self.mode == "time_major_z":
            return z.transpose(0, 1), h
        return z


class WrongHead(nn.Module):
    def forward(self, z, y):
        return torch.zeros(z.shape[1], z.shape[0], dtype=z.dtype)  # [T, B]: the wrong order


@pytest.mark.parametrize("mode, error, words", [
    ("time_major_z", ValueError, ["WrongZ.forward", "[B, T, Z]", "[10, 5, 8]"]),
    ("state_grows", ValueError, ["WrongZ.forward's h[0]", "[2, 5, 8]", "[3, 5, 8]"]),
    ("z_only", TypeError, ["WrongZ.forward", "(z, h)", "Tensor"]),
])
def test_a_module_breaking_the_contract_is_named(mode, error, words):
    x, y = make_batch(False)
    with pytest.raises(error) as raised:  # as the first block sees it: no first-call check
        call(WrongZ(mode), MlpHead(H, CLASSES).double(), x, y, N=3, check_cuts=False)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_a_head_returning_the_wrong_shape_is_named():
    x, y = make_batch(False)
    with pytest.raises(ValueError, match=r"WrongHead.forward: expected the per-step loss of "
                                         r"shape \[B, T\] = \[5, 10\], got \[10, 5\]"):
        call(make_rnn("gru"), WrongHead(), x, y, N=3, check_cuts=False)  # a block's shape


class Boom(Exception):
    pass


class FailsInBlock(nn.Module):
    """Raises on its n-th call (the probe makes calls 1 and 2: h None, then zeros)."""

    def __init__(self, fail_at, exception=Boom("block 3 failed")):
        super().__init__()
        self.gru, self.calls = nn.GRU(F, H, batch_first=True).double(), 0
        self.fail_at, self.exception = fail_at, exception

    def forward(self, x, h):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.exception
        return self.gru(x, h)


@pytest.mark.parametrize("fail_at", [3, 5, 9], ids=["first-block", "no-grad-pass", "backward"])
def test_user_exception_reaches_caller_and_grads_stay(fail_at):
    rnn, out = FailsInBlock(fail_at), MlpHead(H, CLASSES).double()
    x, y = make_batch(False)
    x.requires_grad_(True)
    for p in (*rnn.parameters(), *out.parameters(), x):
        p.grad = torch.full_like(p, 7.0)
    rng = torch.get_rng_state()
    with pytest.raises(Boom) as raised:  # at its phase of the engine: no first-call check
        vlrnn.VLRNN(rnn, out, "SUM", N=5, check_cuts=False)(x, y)
    assert raised.value is rnn.exception and raised.value.args == ("block 3 failed",)
    for p in (*rnn.parameters(), *out.parameters(), x):
        assert torch.equal(p.grad, torch.full_like(p, 7.0))
    assert torch.equal(torch.get_rng_state(), rng)


class Slow(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True).double()

    def forward(self, x, h):
        time.sleep(0.05)
        return self.gru(x, h)


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test, whatever started it: a shell that starts
    a command in the background may leave SIGINT ignored (it is, under
    scripts/test_debian13.sh started with &), and then no Ctrl-C reaches any program."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class InterruptedInAFinalizer(nn.Module):
    """A GRU whose third block drops an object whose finalizer gets the Ctrl-C: the signal
    arrives, and the next bytecode CPython runs is the finalizer's."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, batch_first=True).double()
        self.blocks = 0

    def forward(self, x, h):
        self.blocks += 1
        if self.blocks == 3:
            Finalized()  # dropped at once: its __del__ runs here
        time.sleep(0.01)
        return self.gru(x, h)


class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecode in the finalizer, where the interrupt is raised
            pass


def test_ctrl_c_raised_inside_a_finalizer_still_interrupts(ctrl_c_raises):
    """NOTE [ A Ctrl-C inside a finalizer ]: CPython hands a KeyboardInterrupt raised in a
    finalizer to sys.unraisablehook, and the call ran to its end before (DID NOT RAISE)."""
    rnn, out = InterruptedInAFinalizer(), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=300)  # 300 one-step blocks: ~4 s uninterrupted
    hook = sys.unraisablehook
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        vlrnn.VLRNN(rnn, out, check_cuts=False)(x, y, method="vlrnn:block_length=1")
    assert time.monotonic() - start < 3
    assert rnn.blocks < 100
    assert sys.unraisablehook is hook  # put back
    for p in (*rnn.parameters(), *out.parameters()):
        assert p.grad is None


def test_ctrl_c_raises_keyboard_interrupt_promptly(ctrl_c_raises):
    rnn, out = Slow(), MlpHead(H, CLASSES).double()
    x, y = make_batch(False, steps=2000)  # 2000 one-step blocks: ~200 s uninterrupted
    # The earlier tests' garbage, collected during the call, may get the Ctrl-C in a
    # finalizer: NOTE [ A Ctrl-C inside a finalizer ] keeps it.
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        vlrnn.VLRNN(rnn, out)(x, y, method="vlrnn:block_length=1")
    assert time.monotonic() - start < 10
    for p in (*rnn.parameters(), *out.parameters()):
        assert p.grad is None
