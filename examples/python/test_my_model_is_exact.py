"""Put VLRNN's verifier in your own pytest suite: every block method must give your
model's full-BPTT gradients.

Run: PYTHONPATH=build/python python3 -m pytest examples/python/test_my_model_is_exact.py
"""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence

import vlrnn


class MyModel(nn.Module):  # a GRU feeding a 2-layer LSTM, with dropout between
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 16, batch_first=True)
        self.lstm = nn.LSTM(16, 8, num_layers=2, dropout=0.25, batch_first=True)

    def forward(self, x, h):
        mid, h_gru = self.gru(x, None if h is None else h[0])
        z, (h_lstm, c_lstm) = self.lstm(mid, None if h is None else h[1:])
        return z, (h_gru, h_lstm, c_lstm)


class GaussianHead(nn.Module):  # your own likelihood: a Gaussian's negative log-density
    def __init__(self):
        super().__init__()
        self.mean, self.log_std = nn.Linear(8, 1), nn.Linear(8, 1)

    def forward(self, z, y):
        dist = torch.distributions.Normal(self.mean(z), self.log_std(z).exp())
        return -dist.log_prob(y).squeeze(-1)


def test_my_model_is_exact_on_padded_batches():
    torch.manual_seed(0)
    model, head = MyModel().double(), GaussianHead().double()
    lengths = [40, 13, 27, 1]
    x = pack_sequence([torch.randn(n, 3, dtype=torch.float64) for n in lengths],
                      enforce_sorted=False)
    y = pack_sequence([torch.randn(n, 1, dtype=torch.float64) for n in lengths],
                      enforce_sorted=False)
    report = vlrnn.assert_exact(model, head, x, y)  # AssertionError with the table if not
    print(report)
