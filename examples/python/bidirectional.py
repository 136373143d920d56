"""A bidirectional LSTM and a minGRU, trained with exact block-wise BPTT from Python.

Run: PYTHONPATH=build/python python3 examples/python/bidirectional.py
"""
import torch
from torch import nn

import vlrnn


class Head(vlrnn.OutputModule):  # out(z, y) -> per-step loss [B, T]
    def __init__(self, features, classes):
        super().__init__()
        self.linear = nn.Linear(features, classes)

    def forward(self, z, y):
        return nn.functional.cross_entropy(self.linear(z).transpose(1, 2), y, reduction="none")


torch.manual_seed(0)
B, T, F, H = 8, 1000, 4, 32
x = torch.randn(B, T, F)
y = (x[..., 0] + x[..., 0].roll(-1, dims=1) > 0).long()  # reads the next step: needs both ways

models = {
    "bidirectional LSTM": (nn.LSTM(F, H, batch_first=True, bidirectional=True), Head(2 * H, 2)),
    "minGRU": (vlrnn.nn.MinGRU(F, H, num_layers=2, batch_first=True), Head(H, 2)),
}
for name, (rnn, out) in models.items():
    model = vlrnn.VLRNN(rnn, out, "MEAN", N=10)  # 10 blocks; bivlrnn for the bidirectional one
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(30):
        optimizer.zero_grad()
        loss, loss_seq, h = model(x, y)
        optimizer.step()
    print(f"{name}: method {model.method_for()}, loss {loss.item():.4f}")
    vlrnn.assert_exact(rnn, out, x[:, :60], y[:, :60])  # gradients equal full BPTT's
