"""The shims between PyTorch 1.13 and 2.x (vlrnn/_compat.py), each on the version it runs."""
import warnings

import torch

from vlrnn import _compat


def test_autocast_enabled_follows_torch_autocast():
    assert not _compat.autocast_enabled()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _compat.autocast_enabled()
    assert not _compat.autocast_enabled()


def test_add_note_keeps_the_exception_and_adds_the_note():
    error = ValueError("what the user's code said")
    _compat.add_note(error, "vlrnn: where it ran")
    assert str(error) == "what the user's code said"
    if hasattr(error, "add_note"):  # Python 3.11+
        assert error.__notes__ == ["vlrnn: where it ran"]


def test_warn_caller_points_past_the_package_and_torch():
    def inside_torch_and_vlrnn():  # stands for a frame of the package: the test's own
        _compat.warn_caller("message", RuntimeWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside_torch_and_vlrnn()
    assert caught[0].filename == __file__
    assert caught[0].category is RuntimeWarning


def test_autocast_dtype_is_the_regions_lower_precision():
    assert _compat.autocast_dtype() is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _compat.autocast_dtype() == torch.bfloat16
