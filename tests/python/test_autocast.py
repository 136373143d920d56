"""torch.autocast around a VLRNN call: torch.nn's LSTM runs as the module itself (the cells
compute in the parameters' dtype), with its casts made anew in each pass; vlrnn.nn's cells
refuse it with a clear error."""
import pytest
import torch
from torch import nn

import vlrnn
from conftest import CrossEntropyHead

F, H, CLASSES, B, T = 3, 8, 4, 2, 20
BF16_EPS = 2.0 ** -7  # bfloat16's 8 significant bits


class Head(CrossEntropyHead):
    def __init__(self):
        super().__init__(H, CLASSES)


def flat_grads(modules):
    return torch.cat([p.grad.flatten() for m in modules for p in m.parameters()])


def test_vlrnn_under_autocast_matches_full_bptt_under_autocast():
    # Before: "self and mat2 must have the same dtype" inside the cells, and with the cells
    # off, no gradient at all (a cast cached without grad in the pass without gradients).
    torch.manual_seed(0)
    rnn, out = nn.LSTM(F, H, batch_first=True), Head()
    x, y = torch.randn(B, T, F), torch.randint(0, CLASSES, (B, T))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want_loss = vlrnn.PlainRNN(rnn, out, "SUM")(x, y)[0]
        want_loss.backward()
    want = flat_grads([rnn, out])
    for p in list(rnn.parameters()) + list(out.parameters()):
        p.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = vlrnn.VLRNN(rnn, out, "SUM")(x, y, N=4)[0]
    got = flat_grads([rnn, out])
    # One function in bfloat16 computed in other orders: equal to its rounding.
    assert abs(loss.item() - want_loss.item()) <= BF16_EPS * abs(want_loss.item())
    assert ((got - want).norm() / want.norm()).item() < 2 * BF16_EPS


def test_the_hand_written_cells_refuse_autocast():
    x, y = torch.randn(B, T, F), torch.randint(0, CLASSES, (B, T))
    with torch.autocast("cpu", dtype=torch.bfloat16), \
            pytest.raises(ValueError, match="torch.autocast is not supported by the "
                                            "hand-written cells"):
        vlrnn.VLRNN(vlrnn.nn.LSTM(F, H, batch_first=True), Head(), "SUM")(x, y, N=4)
