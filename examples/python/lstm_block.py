"""VLRNN's hand-written LSTM as a drop-in for torch.nn.LSTM, in an ordinary training step.

Run: PYTHONPATH=build/python python3 examples/python/lstm_block.py
"""
import torch
from torch import nn

import vlrnn

torch.manual_seed(0)
stock = nn.LSTM(16, 64, num_layers=2, batch_first=True)
fast = vlrnn.nn.LSTM(16, 64, num_layers=2, batch_first=True)
fast.load_state_dict(stock.state_dict())  # same parameter names and layout

x = torch.randn(8, 300, 16)
for module in (stock, fast):
    z, (h, c) = module(x)
    loss = z.pow(2).mean()
    loss.backward()  # plain autograd: lstm_block's hand-written backward runs here
    print(f"{type(module).__module__}.{type(module).__name__}: loss {loss.item():.6f}, "
          f"|grad W_hh0| {module.weight_hh_l0.grad.norm():.6f}")

diff = (stock.weight_hh_l0.grad - fast.weight_hh_l0.grad).abs().max().item()
print(f"max |grad difference| {diff:.2e}")
assert diff < 1e-4
