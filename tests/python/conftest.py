"""Shared models and batches for the Python package's tests (run by ctest: python.pytest)."""
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence

import vlrnn
from vlrnn import _C

# The oneDNN probe runs once per process and warns where oneDNN's LSTM is wrong (NOTE
# [ oneDNN's LSTM inference, checked ]). Run here, before any test, so that a test that
# records warnings sees only its own; the warning itself is tested in a fresh process
# (test_warnings.py).
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _C.onednn_lstm_inference_agrees()

B, F, H, CLASSES, T = 5, 6, 8, 4, 30

# torch.amp.GradScaler, which scales on the CPU too (2.3+; before, torch.cuda.amp's only).
CPU_GRAD_SCALER = hasattr(getattr(torch, "amp", None), "GradScaler")


class GRU(nn.GRU, vlrnn.RNNModule):
    pass


class LSTM(nn.LSTM, vlrnn.RNNModule):
    pass


class Composite(vlrnn.RNNModule):
    """A GRU feeding a 3-layer LSTM; state (h_gru, h_lstm, c_lstm). torch.nn's modules, or
    vlrnn.nn's (whose dropout draws its masks per step: exact under any cut)."""

    def __init__(self, n_in, n_hidden, dropout=0.0, nn_module=nn):
        super().__init__()
        self.gru = nn_module.GRU(n_in, 2 * n_hidden, batch_first=True)
        self.lstm = nn_module.LSTM(2 * n_hidden, n_hidden, batch_first=True, num_layers=3,
                                   dropout=dropout)

    def forward(self, x, h):
        tmp, h_gru = self.gru(x, None if h is None else h[0])
        z, h_lstm = self.lstm(tmp, None if h is None else h[1:3])
        return z, (h_gru, *h_lstm)


class CellLoop(nn.Module):
    """rnn(x [B, T, F], h [1, B, H]) -> (z [B, T, H], h): `cell` (an nn.RNNCell or
    GRUCell) looped over the steps from zeros when h is None; step(h) may change each new
    state, for the tests' variants."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def step(self, h):
        return h

    def forward(self, x, h):
        h = x.new_zeros(x.shape[0], self.cell.hidden_size) if h is None else h[0]
        steps = []
        for t in range(x.shape[1]):
            h = self.step(self.cell(x[:, t], h))
            steps.append(h)
        return torch.stack(steps, 1), h.unsqueeze(0)


class FirstStepOfEachCallDetached(nn.Module):
    """A GRU taking no gradient into the first step of the x it is given: cut or whole, the
    same outputs and parameter gradients, but dL/dx differs where a block starts."""

    def __init__(self, n_in, n_hidden):
        super().__init__()
        self.gru = nn.GRU(n_in, n_hidden, batch_first=True)

    def forward(self, x, h):
        return self.gru(torch.cat([x[:, :1].detach(), x[:, 1:]], 1), h)


class CrossEntropyHead(nn.Module):
    """A linear layer and cross-entropy per step: the plainest head."""

    def __init__(self, n_hidden, n_out):
        super().__init__()
        self.linear = nn.Linear(n_hidden, n_out)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


class MlpHead(vlrnn.OutputModule):
    """An MLP head with a categorical log-likelihood."""

    def __init__(self, n_hidden, n_out):
        super().__init__()
        self.ffwd = nn.Sequential(nn.Linear(n_hidden, 10), nn.ELU(), nn.Linear(10, n_out))

    def forward(self, z, y):
        return -torch.distributions.Categorical(logits=self.ffwd(z)).log_prob(y)


class TargetHead(vlrnn.OutputModule):
    """A head predicting a target y [B, Tb, O] that may carry a graph (an encoder's output):
    squared error."""

    def __init__(self, n_hidden, n_target):
        super().__init__()
        self.linear = nn.Linear(n_hidden, n_target)

    def forward(self, z, y):
        return ((self.linear(z) - y) ** 2).sum(-1)


def make_rnn(kind, dtype=torch.float64, dropout=0.0):
    if kind == "gru":
        return GRU(F, H, batch_first=True).to(dtype)
    if kind == "lstm3":
        return LSTM(F, H, batch_first=True, num_layers=3, dropout=dropout).to(dtype)
    if kind == "composite":
        return Composite(F, H, dropout=dropout).to(dtype)
    if kind == "vlrnn_nn_composite":
        return Composite(F, H, dropout=dropout, nn_module=vlrnn.nn).to(dtype)
    raise ValueError(kind)


def make_batch(packed, dtype=torch.float64, seed=0, steps=T, batch=B):
    g = torch.Generator().manual_seed(seed)
    if packed:
        lengths = torch.randint(steps // 5, steps + 1, (batch,), generator=g)
        lengths[0] = steps
        x = pack_sequence([torch.randn(int(n), F, dtype=dtype, generator=g) for n in lengths],
                          enforce_sorted=False)
        y = pack_sequence([torch.randint(0, CLASSES, (int(n),), generator=g) for n in lengths],
                          enforce_sorted=False)
        return x, y
    x = torch.randn(batch, steps, F, dtype=dtype, generator=g)
    y = torch.randint(0, CLASSES, (batch, steps), generator=g)
    return x, y


def grads(modules):
    return [p.grad.clone() if p.grad is not None else None
            for m in modules for p in m.parameters()]


def max_rel_diff(got, want):
    """Largest |got - want| relative to each tensor's largest |want| entry."""
    worst = 0.0
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is None:
            continue
        scale = w.abs().max().item() or 1.0
        worst = max(worst, (g - w).abs().max().item() / scale)
    return worst


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(1234)


# State and gradient helpers of the tests that compare gradients across calls (grad_h,
# resets).
def as_tuple(h):
    """A state's tensors as a tuple: one tensor, or a tuple's."""
    return (h,) if isinstance(h, torch.Tensor) else tuple(h)


def leaves(h):
    """Detached copies of a state that require grad, in its layout."""
    if isinstance(h, torch.Tensor):
        return h.detach().clone().requires_grad_()
    return tuple(t.detach().clone().requires_grad_() for t in h)


def packed(t, lengths):
    """Batch-first t [B, T, ...] packed with `lengths`, in the caller's order."""
    return pack_padded_sequence(t, lengths, batch_first=True, enforce_sorted=False)


def zero(*modules):
    for m in modules:
        m.zero_grad(set_to_none=True)


def worst(got, want):
    """The largest relative difference of paired tensors (by each one's max magnitude)."""
    assert len(got) == len(want)
    return max(((g - w).abs().max() / w.abs().max()).item() for g, w in zip(got, want))
