"""The shims between PyTorch 1.13 and 2.x (vlrnn/_compat.py), each on the version it runs."""
import warnings

import pytest
import torch
from torch.nn.utils import parametrize

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


def test_parametrize_cache_per_call_keeps_the_callers_entries_and_drops_its_own():
    outside = torch.ones(2)
    with _compat.parametrize_cache_per_call():  # cached() off: nothing to keep apart
        parametrize._cache[("off", "w")] = outside
    assert parametrize._cache.pop(("off", "w")) is outside
    with parametrize.cached():
        parametrize._cache[("module", "before")] = outside
        with _compat.parametrize_cache_per_call():
            assert ("module", "before") not in parametrize._cache  # computed anew inside
            parametrize._cache[("module", "inside")] = torch.zeros(2)
        assert parametrize._cache == {("module", "before"): outside}
    assert parametrize._cache == {}


def test_gradient_hook_dicts_hold_hooks_off_while_empty():
    tensor = torch.ones(2, requires_grad=True)
    assert gradient_hook_dicts_are_empty(tensor)
    calls = []
    tensor.register_hook(lambda g: calls.append("pre"))
    if hasattr(tensor, "register_post_accumulate_grad_hook"):  # 2.1+
        tensor.register_post_accumulate_grad_hook(lambda t: calls.append("post"))
    expected = ["pre", "post"] if hasattr(tensor, "register_post_accumulate_grad_hook") \
        else ["pre"]
    pre, post = _compat.gradient_hook_dicts(tensor)
    held = dict(pre), dict(post)
    pre.clear()
    post.clear()
    (tensor * 2).sum().backward()
    assert calls == []
    pre.update(held[0])
    post.update(held[1])
    (tensor * 2).sum().backward()
    assert calls == expected


def gradient_hook_dicts_are_empty(tensor):
    return all(len(d) == 0 for d in _compat.gradient_hook_dicts(tensor))


def test_grad_scaler_types_take_every_scaler_this_torch_has():
    types = _compat.grad_scaler_types()
    assert len(types) == 1
    assert issubclass(torch.cuda.amp.GradScaler, types)  # its own class, or a subclass (2.3+)
    amp = getattr(torch.amp, "GradScaler", None)
    assert amp is None or types == (amp,)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs torch 2.x")
def test_compiled_modules_are_told_apart():
    linear = torch.nn.Linear(2, 2)
    wrapper = torch.compile(linear)  # compiles nothing until called
    assert _compat.compiled_module_of(wrapper) is linear
    assert _compat.compiled_module_of(linear) is None
    assert _compat.is_compiled(wrapper) and not _compat.is_compiled(linear)
    if hasattr(torch.nn.Module, "compile"):  # 2.2+: compiled in place
        in_place = torch.nn.Linear(2, 2)
        in_place.compile()
        assert _compat.is_compiled(in_place) and _compat.compiled_module_of(in_place) is None
