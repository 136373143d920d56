"""A training loop with VLRNN from Python: any nn.Module, exact gradients, flat memory.

Run: PYTHONPATH=build/python python3 examples/python/train_loop.py
"""
import torch
from torch import nn

import vlrnn


class LSTM(nn.LSTM, vlrnn.RNNModule):  # rnn(x, h) -> (z, h), batch-first
    pass


class Head(vlrnn.OutputModule):  # out(z, y) -> per-step loss [B, T]
    def __init__(self, hidden, classes):
        super().__init__()
        self.linear = nn.Linear(hidden, classes)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


torch.manual_seed(0)
B, T, F, H, C = 8, 2000, 4, 32, 3
rnn, out = LSTM(F, H, batch_first=True), Head(H, C)
model = vlrnn.VLRNN(rnn, out, "MEAN", N=20)  # 20 blocks of 100 steps
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(B, T, F)
y = (x[..., 0] > 0).long() + (x[..., 1] > 1).long()  # a class per step, from the inputs

for step in range(30):
    optimizer.zero_grad()
    loss, loss_seq, h = model(x, y)  # forward + backward inside; loss is detached
    optimizer.step()
    if step % 10 == 0 or step == 29:
        print(f"step {step:2d}  loss {loss.item():.4f}")
