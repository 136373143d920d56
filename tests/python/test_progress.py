"""A long call says so: a schedule recomputing far more than T warns up front with the
forward steps it will take, and a call past a few seconds prints its progress."""
import re
import warnings

import pytest
import torch
from torch import nn

import vlrnn
import vlrnn._progress as progress
from conftest import CLASSES, H, MlpHead

F, B = 3, 2


def workload(steps):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, steps, F, dtype=torch.float64, generator=g),
            torch.randint(0, CLASSES, (B, steps), generator=g))


def test_a_quadratic_schedule_warns_with_its_forward_steps():
    x, y = workload(200)  # revolve with one slot: T + T (T - 1) / 2 forward steps
    model = vlrnn.VLRNN(nn.GRU(F, H, batch_first=True).double(), MlpHead(H, CLASSES).double())
    with pytest.warns(RuntimeWarning, match=r"'revolve:slots=1' \(revolve\(s=1\)\) will run "
                                            r"20,100 forward steps for T = 200") as caught:
        model(x, y, method="revolve:slots=1")
    assert caught[0].filename == __file__  # attributed to the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # linear recomputation: no warning
        model(x, y, method="revolve:slots=8")
        model(x, y, N=7)


def test_a_long_call_prints_its_progress(monkeypatch, capsys):
    monkeypatch.setattr(progress, "FIRST_LINE_SECONDS", 0.0)
    monkeypatch.setattr(progress, "LINE_INTERVAL_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REPORT_SECONDS", 0.0)
    x, y = workload(40)
    model = vlrnn.VLRNN(nn.GRU(F, H, batch_first=True).double(), MlpHead(H, CLASSES).double())
    model(x, y, method="revolve:slots=2")
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("vlrnn: revolve(s=2): ") for line in lines)
    assert re.fullmatch(r"vlrnn: revolve\(s=2\): [\d,]+ of [\d,]+ forward steps \([\d.]+ %\), "
                        r"\d+ s, about \d+ s left", lines[-1]), lines[-1]
    total = int(lines[-1].split(" of ")[1].split()[0].replace(",", ""))
    assert total > 2 * 40  # revolve with two slots recomputes
    model.progress = False
    model(x, y, method="revolve:slots=2")
    assert capsys.readouterr().err == ""


def test_progress_is_checked():
    with pytest.raises(TypeError, match="progress: expected True or False, got 'yes'"):
        vlrnn.VLRNN(nn.GRU(F, H, batch_first=True), MlpHead(H, CLASSES), progress="yes")
