"""A stream cut into calls, with exact gradients across the calls' boundaries.

Each call starts from the previous call's final state (h0=) and, run last to first, is
handed the next call's dL/dh0 as the gradient of its final state (grad_h=): the
parameters' gradients are then those of one call on the whole stream (loss_scaling='SUM').

Run: PYTHONPATH=build/python python3 examples/python/chunked_stream.py
"""
import torch
from torch import nn

import vlrnn


class Head(vlrnn.OutputModule):  # out(z, y) -> per-step loss [B, T]
    def __init__(self, hidden, classes):
        super().__init__()
        self.linear = nn.Linear(hidden, classes)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


torch.manual_seed(0)
B, T, F, H, C, CALL = 4, 60, 3, 16, 3, 7  # calls of 7 steps; the last one has 4
rnn = nn.LSTM(F, H, num_layers=2, batch_first=True).double()
out = Head(H, C).double()
x = torch.randn(B, T, F, dtype=torch.float64)
y = torch.randint(0, C, (B, T))
calls = list(zip(x.split(CALL, dim=1), y.split(CALL, dim=1)))

for method in ("vlrnn:block_length=3", "vlrnn:block_length=10", "revolve:slots=2"):
    model = vlrnn.VLRNN(rnn, out, "SUM", method=method)

    # One call on the whole stream: the reference.
    model.zero_grad()
    model(x, y)
    whole = [p.grad.clone() for p in model.parameters()]

    # Forward, without gradients: the state each call starts from.
    entries, h = [], None
    with torch.no_grad():
        for xc, yc in calls:
            entries.append(h)
            h = model(xc, yc, h)[2]

    # Backward, last call to first: each from its entry state (a leaf that requires grad),
    # seeded with the gradient at its end, the next call's h0.grad.
    model.zero_grad()
    grad_h = None
    for (xc, yc), h0 in reversed(list(zip(calls, entries))):
        if h0 is not None:
            h0 = tuple(t.detach().requires_grad_() for t in h0)
        model(xc, yc, h0, grad_h=grad_h)
        grad_h = None if h0 is None else tuple(t.grad for t in h0)

    worst = max(((p.grad - w).abs().max() / w.abs().max()).item()
                for p, w in zip(model.parameters(), whole))
    print(f"{method}: {len(calls)} calls of {CALL} steps vs one call: max relative "
          f"difference {worst:.1e}")
    assert worst < 1e-10
