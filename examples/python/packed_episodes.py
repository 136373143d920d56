"""Episodes packed into streams, each restarting from the initial state: resets=.

An RL buffer or a corpus of documents often comes as a few long streams in which many short
episodes follow one another. resets= tells VLRNN where each new episode starts, as cu_seqlens
offsets (one integer tensor per stream) or as a bool mask [B, T]; the state restarts there
from h0 (or zeros) and no gradient crosses the boundary. Every method stays exact: here
VLRNN's blocks against PlainRNN, which calls the LSTM once per stretch between resets.

Run: PYTHONPATH=build/python python3 examples/python/packed_episodes.py
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
B, T, F, H, C = 3, 400, 4, 32, 5
rnn = nn.LSTM(F, H, batch_first=True).double()
out = Head(H, C).double()
x = torch.randn(B, T, F, dtype=torch.float64)
y = torch.randint(0, C, (B, T))
# Each stream: episodes of 5 to 60 steps back to back; the offsets where each one starts.
episode_starts = []
for _ in range(B):
    lengths = torch.randint(5, 61, (T // 5,))
    starts = torch.cumsum(lengths, 0) - lengths
    episode_starts.append(starts[starts < T])

reference = vlrnn.PlainRNN(rnn, out)
loss, _, _ = reference(x, y, resets=episode_starts)
loss.backward()
want = [p.grad.clone() for p in reference.parameters()]

for method in ("vlrnn:block_length=20", "checkpoint", "planner:percent=10"):
    model = vlrnn.VLRNN(rnn, out, method=method)
    model.zero_grad()
    model(x, y, resets=episode_starts)
    worst = max(((p.grad - w).abs().max() / w.abs().max()).item()
                for p, w in zip(model.parameters(), want))
    print(f"{method}: {sum(len(s) for s in episode_starts)} episodes in {B} streams of {T} "
          f"steps, vs PlainRNN: max relative difference {worst:.1e}")
