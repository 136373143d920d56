"""What differs between the PyTorch versions the package supports (1.13 to 2.x), in one
place: each shim names the versions it bridges, and tests/python/test_compat.py covers it."""
import contextlib
import os
import sys
import warnings

import torch
from torch.nn.utils import parametrize


def not_compiled(function):
    """function, which torch.compile (2.1+: torch.compiler.disable) runs as it stands,
    untraced; before 2.1 there is nothing to keep it from. NOTE [ The engine runs untraced ]:
    a model compiled whole with VLRNN inside it would have dynamo trace the package's own
    Python (generator states saved and put back, gradient hooks held off, the C++ engine
    called), which it would break into graphs at every call into _C, and whose state
    changes it is not built to replay. The user's modules, compiled by the user, still run
    compiled within it."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return function if disable is None else disable(function)


def compiled_module_of(module):
    """The module that `module`, a torch.compile wrapper, compiles (torch._dynamo's
    OptimizedModule keeps it in _orig_mod, private, 2.0+); None for any other module."""
    inner = getattr(module, "_orig_mod", None)
    return inner if isinstance(inner, torch.nn.Module) else None


def is_compiled(module):
    """Whether `module` runs compiled: a torch.compile wrapper, or compiled in place by
    Module.compile() (2.2+, which keeps the compiled call in _compiled_call_impl, private)."""
    return compiled_module_of(module) is not None or \
        getattr(module, "_compiled_call_impl", None) is not None


def autocast_enabled():
    """Whether torch.autocast is on for the CPU or CUDA on this thread. 2.4+ asks by device
    type (the old per-device functions are deprecated there); 1.13 has only those."""
    try:
        return torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")
    except TypeError:  # before 2.4: no device argument
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def autocast_dtype():
    """The lower-precision dtype torch.autocast computes in on the CPU, or None when it is
    off (CUDA's when only CUDA's is on)."""
    if not autocast_enabled():
        return None
    try:
        on_cpu = torch.is_autocast_enabled("cpu")
        return torch.get_autocast_dtype("cpu" if on_cpu else "cuda")
    except (TypeError, AttributeError):  # before 2.4
        return (torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled()
                else torch.get_autocast_gpu_dtype())


def grad_scaler_types():
    """The classes of torch's mixed-precision loss scaler: torch.amp.GradScaler (2.3+, for
    any device), or before it torch.cuda.amp.GradScaler (1.13 to 2.2, CUDA only). From 2.3
    on, torch.cuda.amp's is a deprecated subclass of torch.amp's, due to be removed, so it
    is neither needed nor looked up there."""
    amp_scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    return (amp_scaler,) if amp_scaler is not None else (torch.cuda.amp.GradScaler,)


@contextlib.contextmanager
def parametrize_cache_per_call():
    """Runs the body (one call of a user's module) with torch.nn.utils.parametrize.cached()'s
    cache to itself, when the caller turned it on: what the body caches is dropped when it
    returns, and what was cached before is put back. A parametrized weight cached in a call
    without gradients (the probe, a block method's pass that stores states) has no graph:
    reused by a block recomputed with gradients, its parameter would get none. Within one
    call, the grad mode is one, so caching there stays exact and keeps its use (a weight
    computed once per call, not per step). The cache is private in every version this
    package supports (a dict parametrize._cache, a count parametrize._cache_enabled, 1.13
    to 2.x); without them, nothing is done."""
    cache = getattr(parametrize, "_cache", None)
    if not getattr(parametrize, "_cache_enabled", 0) or not isinstance(cache, dict):
        yield
        return
    outside = dict(cache)
    cache.clear()
    try:
        yield
    finally:
        cache.clear()
        cache.update(outside)


def gradient_hook_dicts(tensor):
    """(pre, post): the dicts torch keeps a leaf's gradient hooks in, in the order it calls
    them. pre: register_hook's, called on each gradient before it is accumulated
    (tensor._backward_hooks, 1.13 to 2.x); post: register_post_accumulate_grad_hook's,
    called with the tensor after (tensor._post_accumulate_grad_hooks, 2.1+). Both private.
    Autograd reads a dict when it calls its hooks, so emptying it and filling it again holds
    them off in between. A tensor without hooks (or a torch without the second) gets a
    fresh empty dict, which nothing reads."""
    return (getattr(tensor, "_backward_hooks", None) or {},
            getattr(tensor, "_post_accumulate_grad_hooks", None) or {})


def add_note(error, note):
    """error.add_note(note) (Python 3.11+: shown under the message, the exception itself
    unchanged); before 3.11 the note is dropped rather than the exception replaced."""
    if hasattr(error, "add_note"):
        error.add_note(note)


def warn_caller(message, category):
    """warnings.warn(message, category) attributed to the first frame outside this package
    and torch (nn.Module's call wrappers differ in depth between versions; Python 3.12's
    skip_file_prefixes does this, 3.11 has no such argument)."""
    skipped = (os.path.dirname(__file__), os.path.dirname(torch.__file__))
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn_caller's caller
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
