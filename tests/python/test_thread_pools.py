"""The warning when LibTorch's threads and the BLAS's own threads overfill the cores (NOTE
[ Two pools never share the cores ] in vlrnn/measure/threads.h)."""
import warnings

import pytest
import torch

import vlrnn
from vlrnn import _engine
from conftest import CLASSES, H, MlpHead, make_batch, make_rnn


@pytest.fixture
def fighting_pools(monkeypatch):
    """The engine told that the pools fight here, and nothing checked yet."""
    monkeypatch.setattr(_engine, "_threads_checked", set())
    monkeypatch.setattr(_engine._C, "thread_pools_warning", lambda: "the pools fight")


def run(method):
    x, y = make_batch(False)
    vlrnn.VLRNN(make_rnn("gru"), MlpHead(H, CLASSES).double(), "MEAN", method=method)(x, y)


def test_a_blockwise_method_warns_once_naming_the_fight(fighting_pools):
    with pytest.warns(RuntimeWarning, match="the pools fight") as caught:
        run("vlrnn:num_blocks=3")
    assert caught[0].filename == __file__  # attributed to the user's call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run("vlrnn:num_blocks=3")  # once per thread count: no second warning


def test_full_bptt_cuts_nothing_and_does_not_warn(fighting_pools):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run("full")


def test_no_fight_no_warning(monkeypatch):
    monkeypatch.setattr(_engine, "_threads_checked", set())
    monkeypatch.setattr(_engine._C, "thread_pools_warning", lambda: "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run("vlrnn:num_blocks=3")


def test_the_engine_says_where_the_pools_fight():
    message = _engine._C.thread_pools_warning()
    assert isinstance(message, str)
    if message:  # this process overfills the cores on a torch where that costs
        assert str(torch.get_num_threads()) in message and "OPENBLAS_NUM_THREADS=1" in message
