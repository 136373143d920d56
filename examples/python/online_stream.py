"""A stream of unknown length, trained with exact gradients in memory fixed up front.

A sensor sends chunks of readings until it stops, and nobody knows when that will be.
vlrnn.Stream runs the forward pass as the chunks come, keeps at most `slots` states (h0's
included) whatever the length, and at the end back-propagates the whole stream: the
gradients are those of loss.backward() on the whole stream, checked here.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/python/online_stream.py
"""
import torch
from torch import nn

import vlrnn


class Head(vlrnn.OutputModule):  # out(z, y) -> per-step loss [B, n]
    def __init__(self, hidden, classes):
        super().__init__()
        self.linear = nn.Linear(hidden, classes)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


def sensor(batch, features, generator):
    """Chunks x [B, n, F], y [B, n] of 1 to 16 steps, until the sensor stops (after each
    chunk, with chance 1 in 40). Its own generator: the model's draws are left alone."""
    while True:
        steps = int(torch.randint(1, 17, (1,), generator=generator))
        x = torch.randn(batch, steps, features, dtype=torch.float64, generator=generator)
        yield x, (x.sum(-1) > 0).long()  # is this reading's sum positive?
        if torch.rand(1, generator=generator).item() < 1 / 40:
            return


def kept(chunks, into):
    """Passes `chunks` through, keeping them in `into` for the check below."""
    for chunk in chunks:
        into.append(chunk)
        yield chunk


torch.manual_seed(0)
B, F, H, SLOTS = 8, 3, 32, 6
rnn = vlrnn.nn.LSTM(F, H, num_layers=2, dropout=0.2, batch_first=True).double()
out = Head(H, 2).double()

chunks, generators = [], torch.get_rng_state()
stream = vlrnn.Stream(rnn, out, "MEAN", slots=SLOTS)
loss, loss_seq, h = stream.run(kept(sensor(B, F, torch.Generator().manual_seed(5)), chunks))
counters = stream.last_counters
print(f"stream of {stream.steps} steps in {len(chunks)} chunks, {SLOTS} slots: loss {loss:.6f}, "
      f"{counters['forward_no_grad']} steps recomputed without grad")
streamed = [p.grad.clone() for p in (*rnn.parameters(), *out.parameters())]

# The check: loss.backward() on the whole stream, the same dropout masks (same generators).
torch.set_rng_state(generators)
rnn.zero_grad()
out.zero_grad()
x, y = torch.cat([c[0] for c in chunks], 1), torch.cat([c[1] for c in chunks], 1)
whole, _, _ = vlrnn.PlainRNN(rnn, out, "MEAN")(x, y)
whole.backward()
worst = max(((g - p.grad).abs().max() / p.grad.abs().max()).item()
            for g, p in zip(streamed, (*rnn.parameters(), *out.parameters())))
print(f"vs loss.backward() on the whole stream: max relative difference {worst:.1e}")
