"""One call of the C++ engine on a user's Python modules: what VLRNN and verify share.

Shapes: T = steps, B = batch, F = input features, Z = the module's output features.
"""
import contextlib
import sys

import torch
from torch.nn.utils.rnn import PackedSequence

from . import _C
from ._adapters import BATCH_DIM, BlockFunction, EngineLayoutBlock, HeadFunction, \
    StateLayout, as_state_tuple, split_result
from ._compat import add_note, autocast_dtype, compiled_module_of, grad_scaler_types, \
    gradient_hook_dicts, is_compiled, parametrize_cache_per_call, warn_caller
from ._sequences import batch_from, check_on_device_of, outside_inference_mode, resets_from
from .nn import _BlockRNN, on_the_cpu, per_call_dropout_layers, stock_engine_model, \
    why_not_own_forward

REDUCTIONS = {"MEAN": "mean", "SUM": "sum"}


_threads_checked = set()  # intra-op thread counts already checked in this process


def warn_if_thread_pools_fight(device):
    """A RuntimeWarning, once per intra-op thread count, when LibTorch's threads and the BLAS's
    own threads together overfill the cores on a torch where the two pools fight (NOTE [ Two
    pools never share the cores ] in vlrnn/measure/threads.h): blocks alternate between the
    pools, and run several times slower."""
    if device.type != "cpu" or torch.get_num_threads() in _threads_checked:
        return
    _threads_checked.add(torch.get_num_threads())
    message = _C.thread_pools_warning()
    if message:
        warn_caller(message, RuntimeWarning)


def reduction_of(loss_scaling, name="loss_scaling"):
    if loss_scaling not in REDUCTIONS:
        raise ValueError(f"{name}: expected 'MEAN' or 'SUM', got {loss_scaling!r}")
    return REDUCTIONS[loss_scaling]


def loss_scale_of(grad_scaler, device):
    """The factor a torch GradScaler multiplies this iteration's loss by (1.0 for None, or
    a disabled one): the engine's loss_scale (NOTE [ Loss scale ] in
    vlrnn/methods/gradient_method.h). Asking through scaler.scale(), as a loop's
    scaler.scale(loss) would, also makes the scaler's scale on `device`, which its step()
    needs. None under float16 autocast warns: a loop that forgot it has its gradients
    divided by the scale in scaler.step(), with no other sign."""
    if grad_scaler is None:
        if autocast_dtype() == torch.float16:
            warn_caller("float16 under torch.autocast without grad_scaler=: these gradients "
                        "are not scaled. If the loop steps through a torch.amp.GradScaler, "
                        "pass it as grad_scaler=, or scaler.step() divides them by its scale",
                        RuntimeWarning)
        return 1.0
    if not isinstance(grad_scaler, grad_scaler_types()):
        raise TypeError("grad_scaler: expected None or a torch.amp.GradScaler (torch.cuda.amp's "
                        f"on 1.13), got {type(grad_scaler).__name__}")
    if not grad_scaler.is_enabled():
        return 1.0
    return float(grad_scaler.scale(torch.ones(1, dtype=torch.float32, device=device)))


def check_module(module, name):
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{name}: expected a torch.nn.Module, got {type(module).__name__}")


@contextlib.contextmanager
def _rng_kept(device):
    """Runs the body and puts the generators back: a probe draws nothing the run sees."""
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)


@contextlib.contextmanager
def autocast_cache_off():
    """Runs the body with torch.autocast's cache of casts off. The cache keeps one lower-
    precision copy of each parameter per autocast region, and a copy made without gradients
    (the probe, the engine's pass without grad) has no graph: reused when a block is
    recomputed with grad, the parameter would get no gradient. Off, each op casts anew."""
    enabled = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        torch.set_autocast_cache_enabled(enabled)


@contextlib.contextmanager
def interrupts_kept():
    """Runs the body (a VLRNN call) so that no Ctrl-C is lost in a finalizer.
    NOTE [ A Ctrl-C inside a finalizer ]: CPython raises a pending Ctrl-C's KeyboardInterrupt
    at the next bytecode it runs, and when that belongs to a finalizer (a __del__ or a weakref
    callback, run by the garbage collector or by a last reference going) the exception is
    'ignored': handed to sys.unraisablehook, and the Ctrl-C is gone. A call of many minutes
    then runs to its end. While the body runs, a hook notes such an interrupt, and the
    engine's next call back into Python raises it (within a block, or a progress interval:
    0.25 s); one the engine did not meet raises when the body ends. (Arming the signal again
    from the hook would not do: its handler runs at once, in the hook, as 'ignored' again.)"""
    previous = sys.unraisablehook

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type,
                                                          KeyboardInterrupt):
            _C.set_interrupt_lost(True)
        else:
            previous(unraisable)

    _C.set_interrupt_lost(False)
    sys.unraisablehook = hook
    try:
        yield
    finally:
        if sys.unraisablehook is hook:  # unless something else replaced it meanwhile
            sys.unraisablehook = previous
    if _C.set_interrupt_lost(False):
        raise KeyboardInterrupt


def _first_step(batch):
    """Every sequence's first step, in the caller's form (each has at least one)."""
    x0 = batch.inputs[:1]  # [1, B, F]
    if batch.packed is None:
        return x0.transpose(0, 1)
    order = batch.sort_order()
    return PackedSequence(x0[0, order.to(x0.device)], torch.tensor([batch.batch_size]),
                          order.to(x0.device), torch.argsort(order).to(x0.device))


@contextlib.contextmanager
def buffers_kept(modules):
    """Runs the body and puts every buffer of `modules` ((prefix, module) pairs) back as it
    was; yields the list it fills with the names of those the body changed (in place, or
    replaced)."""
    saved = [(prefix, module, name, b, b._version, b.clone())
             for prefix, module in modules for name, b in module.named_buffers()]
    changed = []
    try:
        yield changed
    finally:
        for prefix, module, name, buffer, version, copy in saved:
            owner_path, _, leaf = name.rpartition(".")
            owner = module.get_submodule(owner_path) if owner_path else module
            if owner._buffers.get(leaf) is not buffer:
                owner._buffers[leaf] = buffer
            elif buffer._version == version and torch.equal(buffer, copy):
                continue  # (an op's own in-place update, BatchNorm's, moves no version)
            with torch.no_grad():
                buffer.copy_(copy)
            changed.append(f"{prefix}.{name}")


def onednn_as_the_engine_runs_it():
    """torch's oneDNN switch off where oneDNN's LSTM computes another function under no-grad
    than training (NOTE [ oneDNN's LSTM inference, checked ]), as the engine's calls have it;
    else nothing."""
    if _C.onednn_lstm_inference_agrees():
        return contextlib.nullcontext()
    return torch.backends.mkldnn.flags(enabled=False)


def probe(rnn, batch, h0):
    """Calls the module on one step without gradients: its output size Z and its state's
    layout, learned from what it returns given h = None (given h0 when it needs a state).
    Nothing it draws or changes stays: the generators and its buffers are put back."""
    name = type(rnn).__name__
    device = batch.inputs.device
    with torch.no_grad(), _rng_kept(device), onednn_as_the_engine_runs_it(), \
            parametrize_cache_per_call():
        first = _first_step(batch)
        given_none = True
        try:
            with _rng_kept(device):
                result = rnn(first, None)
        except Exception as error:
            if h0 is None:
                shape = list((first.data if isinstance(first, PackedSequence) else first).shape)
                add_note(error, f"vlrnn: raised by rnn.forward(x, None) on the first step of "
                         f"every sequence (x {shape}), called to learn its output size and "
                         "state layout")
                raise
            result, given_none = rnn(first, h0), False
        z, h = split_result(result, name)
        if isinstance(z, PackedSequence):
            z = z.data
        if not isinstance(z, torch.Tensor) or z.dim() < 2:
            raise TypeError(f"{name}.forward: expected z, a tensor [B, T, Z] or a "
                            f"PackedSequence, got {type(z).__name__}")
        if h is None:
            raise TypeError(f"{name}.forward: returned no state (h is None); the engine "
                            "carries the state from block to block")
        layout = StateLayout(h, batch.batch_size, f"{name}.forward's h")
        _refuse_a_state_not_in_a_real_dtype(h, name, batch.inputs.dtype)
        if h0 is None and given_none:
            _refuse_a_start_other_than_zeros(rnn, first, (z, h), layout, name, device)
    return z.shape[-1], layout


def _refuse_a_state_not_in_a_real_dtype(h, name, dtype):
    """ValueError for a complex or integer state tensor: the engine starts, carries and
    seeds the gradient of every state tensor in x's dtype, so the first block's would be
    refused further on with a message about the dtype it was given, not about this."""
    for i, t in enumerate(as_state_tuple(h, f"{name}.forward's h")):
        if t.is_floating_point():
            continue
        hint = (" (hold a complex state as its real and imaginary parts, a last dim of 2: "
                "torch.view_as_real(h) to return it, torch.view_as_complex(h) inside "
                "forward)") if t.is_complex() else ""
        raise ValueError(f"{name}.forward's h[{i}]: expected a real floating-point state "
                         f"({dtype}, x's dtype, in which VLRNN starts and carries it), got "
                         f"{t.dtype}{hint}")


def _refuse_a_start_other_than_zeros(rnn, first, outputs, layout, name, device):
    """ValueError when rnn(first, zeros) returns other than rnn(first, None) did (`outputs`,
    from the same generator state): with h0 = None the engine starts the first block from
    zeros, as torch.nn's RNNs take None to mean, and a module that starts elsewhere (a
    learned initial state) would get another function, and no gradient for that state."""
    z, h = outputs
    zeros = [torch.zeros_like(t) for t in as_state_tuple(h, f"{name}.forward's h")]
    try:
        with _rng_kept(device):
            z_zeros, h_zeros = split_result(rnn(first, layout.to_module(zeros)), name)
        h_zeros = as_state_tuple(h_zeros, f"{name}.forward's h")
    except Exception:  # the engine's own call raises it again, with its note
        return
    if isinstance(z_zeros, PackedSequence):
        z_zeros = z_zeros.data
    pairs = [(z_zeros, z)] + list(zip(h_zeros, as_state_tuple(h, "h")))
    if len(h_zeros) != len(layout.shapes) or any(
            not isinstance(got, torch.Tensor) or got.shape != want.shape for got, want in pairs):
        return  # a broken contract, which the engine's own call names
    differ = max(_relative(got.double(), want.double()) for got, want in pairs)
    if differ > _tolerance_for(z.dtype):
        raise ValueError(
            f"rnn: {name}.forward(x, None) starts from another state than zeros: on the first "
            f"step, its outputs differ from forward(x, h) with h zeros by {differ:.2e} "
            "(relative; a learned initial state?). VLRNN runs each block from a state it "
            "carries, the first from zeros when h0 is None, so its gradient would not be "
            "exact. Pass the initial state as h0 (model(x, y, h0), h0 computed from your "
            "parameter gets its gradient through it)")


def probe_head(out, batch, z_size):
    """Calls the head on one step of zeros: with the rnn's probe, what lets a call see which
    buffers the modules change as they run (EngineCall.changed_buffers)."""
    with torch.no_grad(), _rng_kept(batch.inputs.device), parametrize_cache_per_call():
        z = batch.inputs.new_zeros(batch.batch_size, 1, z_size)  # [B, 1, Z]
        try:
            out(z, batch.targets[:1].transpose(0, 1))
        except Exception:  # the engine's own call raises it again, with its note
            pass


def check_features(rnn, batch):
    """x's features against a torch.nn-style RNN's input_size (torch.nn's RNNs and vlrnn.nn's
    declare it), before its own error names a block's shapes."""
    expected = getattr(rnn, "input_size", None)
    if isinstance(rnn, (torch.nn.RNNBase, _BlockRNN)) and isinstance(expected, int) \
            and batch.inputs.shape[2] != expected:
        raise ValueError(f"x: expected {expected} features per step ({type(rnn).__name__}'s "
                         f"input_size), got {batch.inputs.shape[2]}")


def check_parameters(modules, batch):
    """Every parameter on x's device, every floating one in x's dtype: the engine computes
    in one dtype, on one device, and moves nothing."""
    dtype, device = batch.inputs.dtype, batch.inputs.device
    for prefix, module in modules:
        for name, p in module.named_parameters():
            if p.device != device:
                raise ValueError(f"{prefix} parameter {name}: on {p.device}, x on {device}; "
                                 f"put both on one device (e.g. {prefix}.to(x.device))")
            if p.is_floating_point() and p.dtype != dtype:
                raise ValueError(f"{prefix} parameter {name}: dtype {p.dtype} differs from x's "
                                 f"{dtype}; convert the module (e.g. {prefix}.to({dtype}))")


def check_h0(h0, layout, batch, what="h0"):
    """h0 (or another state named `what`, such as grad_h) as a list of tensors in the
    module's layout, checked against it."""
    if h0 is None:
        return None
    tensors = as_state_tuple(h0, what)
    layout.check(tensors, batch.batch_size, what)
    for i, t in enumerate(tensors):
        if t.dtype != batch.inputs.dtype:
            raise TypeError(f"{what}[{i}]: expected dtype {batch.inputs.dtype} (x's), got "
                            f"{t.dtype}")
        check_on_device_of(t, batch.inputs, f"{what}[{i}]")
    return [outside_inference_mode(t) for t in tensors]


def _grad_leaves(*tensors):
    return [t for t in tensors if isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad]


def unique_tensors(tensors):
    """`tensors` without repeats, by identity, in order: a parameter the rnn and the head
    share (tied weights) is one tensor with one .grad, to be handled once."""
    return list({id(t): t for t in tensors}.values())


@contextlib.contextmanager
def gradient_hooks_held(tensors):
    """Runs the body with the gradient hooks of `tensors` held off (register_hook's and
    register_post_accumulate_grad_hook's), and puts them back; yields [(tensor, [its
    pre-accumulation hooks], [its post-accumulation hooks])] for those that have any."""
    held = []
    for t in unique_tensors(tensors):
        pre, post = gradient_hook_dicts(t)
        if pre or post:
            held.append((t, pre, post, dict(pre), dict(post)))
            pre.clear()
            post.clear()
    try:
        yield [(t, list(pre.values()), list(post.values())) for t, _, _, pre, post in held]
    finally:
        for _, pre, post, pre_hooks, post_hooks in held:
            pre.update(pre_hooks)
            post.update(post_hooks)


def _hooked(gradient, hooks):
    """gradient through register_hook-style hooks, as autograd passes it: each may return
    a replacement, or None to keep what it got."""
    for hook in hooks:
        result = hook(gradient)
        if result is not None:
            gradient = result
    return gradient


# NOTE [ A graph from outside, entered per block ]: the engine back-propagates block by
# block, so a tensor with a graph that the modules take from outside the call (a context
# vector an encoder computed, held as an attribute) has that graph entered once per block:
# the second pass raises autograd's 'backward through the graph a second time', which names
# neither the tensor nor a way out. x, h0 and y may carry graphs: the engine gathers their
# gradients and enters each graph once.
GRAPH_FREED = "Trying to backward through the graph a second time"
GRAPH_ENTERED_TWICE = (
    "rnn / out: a backward entered a graph a second time, after its saved tensors were "
    "freed. Most likely the modules use a tensor with a graph from outside the call (a "
    "context an encoder computed, held as an attribute): VLRNN back-propagates block by "
    "block, and each block enters that graph. Pass it in x instead (x = torch.cat([x, "
    "context.unsqueeze(1).expand(-1, T, -1)], 2): dL/dx enters x's graph once), or compute "
    "it inside rnn from its parameters. Or x, h0 or y carry a graph that an earlier "
    "backward() freed: compute them again for each call")


@contextlib.contextmanager
def gradients_as_one_backward(tensors):
    """Runs the body (the engine's backward, block by block) and leaves each .grad of
    `tensors` as one backward() of the whole sequence would: the body computes into fresh
    gradients, added to the old ones on success (once per tensor, however often listed);
    when anything raises, every .grad is left as it was.
    NOTE [ Hooks see the whole gradient ]: autograd calls a tensor's hooks on each gradient
    it hands the tensor, and the engine hands a parameter one per block. A hook that is not
    linear (a clamp: per-parameter clipping) would see the parts and sum its results:
    300 % off, with no word. So the hooks are held off while the engine runs, then called
    once, on the whole gradient, before it is added to the old one; the post-accumulation
    hooks after, as full BPTT's backward() calls them."""
    kept = [(t, t.grad) for t in unique_tensors(tensors)]
    for t, _ in kept:
        t.grad = None
    try:
        with gradient_hooks_held(tensors) as hooked:
            yield
        for t, pre, _ in hooked:
            if pre and t.grad is not None:
                t.grad = _hooked(t.grad, pre)
    except BaseException as error:
        for t, old in kept:
            t.grad = old
        if isinstance(error, RuntimeError) and GRAPH_FREED in str(error):
            raise ValueError(GRAPH_ENTERED_TWICE) from error
        raise
    reached = {id(t) for t, _ in kept if t.grad is not None}
    for t, old in kept:
        if old is not None:
            if t.grad is not None:
                old.add_(t.grad)
            t.grad = old
    for t, _, post in hooked:
        if id(t) in reached:
            for hook in post:
                hook(t)


def engine_model_of(rnn, fast_cells):
    """The C++ model that computes rnn's function, when there is one (an EngineModel):
    the module's own engine_model(), or a stock torch.nn LSTM / GRU's; else None. A
    torch.compile'd module (torch._dynamo's OptimizedModule, the module it wraps in
    _orig_mod) is the module it wraps, unless hooks of the wrapper's own change what a call
    computes: compiling changes how a function runs, not which, and a stock LSTM is one op
    to inductor, so the cells lose nothing, and a bidirectional one runs at all."""
    inner = compiled_module_of(rnn)
    if inner is not None and why_not_own_forward(rnn) is None:
        rnn = inner
    own = getattr(rnn, "engine_model", None)
    engine = own() if callable(own) else None
    if engine is not None or not isinstance(rnn, (torch.nn.LSTM, torch.nn.GRU)):
        return engine
    if getattr(rnn, "bidirectional", False) is not True:
        return stock_engine_model(rnn) if fast_cells else None
    if not fast_cells:
        raise ValueError("fast_cells: a bidirectional torch.nn module cannot be called "
                         "block by block (its output at t depends on every step); it runs "
                         "only by the hand-written cells, fast_cells=True")
    engine = stock_engine_model(rnn)
    if engine is None:
        raise ValueError(f"rnn: a bidirectional {type(rnn).__name__} with a forward of its "
                         "own cannot be cut into blocks (its output at t depends on every "
                         "step), and only torch.nn's own forward runs as the engine's "
                         "bidirectional model; use torch.nn.LSTM / GRU or vlrnn.nn.LSTM / "
                         "GRU as they are")
    return engine


def check_method_fits(method, model, rnn=None):
    """ValueError when `method` (the engine's) cannot run `model` (that of the module `rnn`):
    the bidirectional block method on a left-to-right model, or a method cutting the
    sequence into left-to-right blocks on a bidirectional one."""
    name = method.name
    if isinstance(model, _C.Bidirectional) and not _C.handles_bidirectional(name):
        raise ValueError(f"method: {name!r} cuts the sequence into left-to-right blocks, which "
                         "a bidirectional model's output at t does not allow; use 'bivlrnn' "
                         "(its block method), 'checkpoint' or 'full'")
    if not isinstance(model, _C.Bidirectional) and not _C.handles_left_to_right(name):
        if getattr(rnn, "bidirectional", False) is True:
            # bivlrnn, picked for bidirectional=True, where no engine model computes the
            # module (a forward or hooks of its own): say why, not that it is left-to-right.
            raise ValueError(
                f"rnn: {type(rnn).__name__} has bidirectional=True, but only torch.nn's LSTM "
                "/ GRU (their own forward, no hooks), vlrnn.nn's modules and vlrnn.CppModel's "
                "bidirectional kinds run as the engine's bidirectional model, which bivlrnn "
                "cuts into blocks; called as a module, its output at t depends on every step, "
                "so no cut into blocks is exact. method='full' runs it as one call")
        raise ValueError(f"method: {name!r} is the block method of bidirectional models (rnn "
                         "with bidirectional=True, or a bidirectional C++ kind); use 'vlrnn' "
                         "or another for this left-to-right rnn")


def inexact_parts(rnn, out):
    """Why a block method cannot be exact for these modules, as far as the package can see
    from their structure: the parts of them that compute something else when the sequence is
    cut into blocks. [] when it sees none (verify and the first-call check see the rest).

    A torch.nn RNN draws one mask per dropout layer and call. With one such layer, the calls
    per block draw, on the CPU, the numbers one call draws, in the same order (the first-call
    check warns that this holds on no GPU); with two or more, the layers' draws interleave
    otherwise, and on a GPU even one layer's mask depends on the cut."""
    reasons = []
    for prefix, module in (("rnn", rnn), ("out", out)):
        for path, part in module.named_modules(prefix=prefix):
            if not isinstance(part, torch.nn.RNNBase):
                continue
            layers = per_call_dropout_layers(part)
            on_cpu = on_the_cpu(part)
            if layers >= 2 or (layers == 1 and not on_cpu):
                kind = type(part).__name__
                instead = (f" (use vlrnn.nn.{kind} instead, same arguments and state_dict, "
                           "whose masks are drawn one step at a time)"
                           if kind in ("LSTM", "GRU") else "")
                reasons.append(
                    f"{path} is a torch.nn.{kind} in training mode with dropout {part.dropout} "
                    f"between its {part.num_layers} layers: torch.nn draws those masks once "
                    "per call, so a call per block draws other masks than one call on the "
                    f"whole sequence{instead}")
    return reasons


class EngineCall:
    """The user's modules and batch, as the engine's model, head and tensors.
    changed_buffers: the buffers a call of the modules changes (BatchNorm's running
    statistics, spectral_norm's power iteration), put back after the probe."""

    def __init__(self, rnn, out, x, y, h0, fast_cells=True, grad_h=None, resets=None):
        check_module(rnn, "rnn")
        check_module(out, "out")
        if getattr(rnn, "batch_first", True) is False:
            raise ValueError(f"rnn: {type(rnn).__name__} has batch_first=False, but VLRNN calls "
                             "its rnn batch-first (x [B, T, F]); construct it with "
                             "batch_first=True")
        self.batch = batch_from(x, y)
        # The probes and checks see y as data, the engine leaves of x and y (engine_leaf_for).
        self._graphs_to_enter = []  # [(the caller's tensor, the engine's leaf of it)]
        self.engine_inputs = self.engine_leaf_for(self.batch.inputs)
        self.engine_targets = self.engine_leaf_for(self.batch.targets)
        self.batch = self.batch._replace(targets=self.batch.targets.detach())
        self.resets = resets_from(resets, self.batch)  # [T, B] bool, or None
        check_features(rnn, self.batch)
        check_parameters((("rnn", rnn), ("out", out)), self.batch)
        with buffers_kept((("rnn", rnn), ("out", out))) as self.changed_buffers:
            z_size, self.layout = probe(rnn, self.batch, h0)
            probe_head(out, self.batch, z_size)
        self.rnn, self.out, self.z_size = rnn, out, z_size
        self.h0 = check_h0(h0, self.layout, self.batch)
        rnn_parameters = [("rnn." + n, p) for n, p in rnn.named_parameters()]
        self.rnn_parameters = [p for _, p in rnn_parameters]
        parameters = self.rnn_parameters + list(out.parameters())
        self.engine = engine_model_of(rnn, fast_cells)
        self.block = None  # the adapter calling the user's rnn, when one does
        if self.engine is not None:
            self.model = self.engine.model
        else:
            if hasattr(rnn, "engine_block"):
                block = EngineLayoutBlock(rnn.engine_block(), self.layout, type(rnn).__name__)
            else:
                block = BlockFunction(rnn, self.layout, self.batch.sort_order(),
                                      self.batch.packed is not None, self.batch.time_steps,
                                      parameters)
            self.block = block
            shapes = " ".join(f"{n}{list(p.shape)}" for n, p in rnn_parameters)
            self.model = _C.PythonModel(block, self.batch.inputs.shape[2], z_size,
                                        self.layout.shapes_for(self.batch.batch_size),
                                        BATCH_DIM, rnn_parameters,
                                        f"python:{type(rnn).__qualname__} {shapes}")
        self.head_function = HeadFunction(out, self.batch.time_steps, parameters)
        self.head = _C.PythonHead(self.head_function, z_size,
                                  [("out." + n, p) for n, p in out.named_parameters()])
        inputs = x.data if isinstance(x, PackedSequence) else x
        targets = y.data if isinstance(y, PackedSequence) else y
        self.grad_tensors = unique_tensors(
            parameters + _grad_leaves(inputs, targets, *(self.h0 or [])))
        self.engine_h0 = self._engine_h0()
        self.engine_grad_h = self._engine_grad_h(grad_h)

    def _engine_h0(self):
        """h0 in the engine model's layout. Converted, it is a view of the caller's h0;
        the engine gets it as new leaves instead (their .grad is what the verifier compares),
        and carry_gradients_back() carries their gradients back to the caller's tensors."""
        if self.h0 is None or self.engine is None:
            return self.h0
        with torch.no_grad():
            converted = self.engine.to_engine(tuple(self.h0))
        requires = any(t.requires_grad for t in self.h0)
        return [t.detach().clone().requires_grad_(requires) for t in converted]

    def _engine_grad_h(self, grad_h):
        """grad_h (dL/d(final state), in the module's layout) in the engine model's layout,
        detached: every layout conversion only moves elements, so a gradient converts as the
        state it belongs to does."""
        tensors = check_h0(grad_h, self.layout, self.batch, "grad_h")
        if tensors is None:
            return None
        tensors = [t.detach() for t in tensors]
        if self.engine is not None:
            tensors = list(self.engine.to_engine(tuple(tensors)))
        return tensors

    def engine_leaf_for(self, tensor):
        """x or y (time-major, of this call or of a stream's later chunk) as the engine is
        given it: the tensor itself, or when it requires grad, a leaf of its own. NOTE
        [ Targets with a graph ] (in vlrnn/methods/gradient_method.h): the engine would enter
        y's graph once per compute() and x's once more, and x and y may share one (next-step
        prediction in an encoder's space: x = e[:, :-1], y = e[:, 1:]); a stream must enter
        them once for all its chunks, and the probes and first-call checks not at all. So
        the engine gathers dL/dx and dL/dy in leaves, and carry_gradients_back() takes them
        into the caller's graphs in one backward, with a computed h0's."""
        if not tensor.requires_grad:
            return tensor
        leaf = tensor.detach().requires_grad_()
        self._graphs_to_enter.append((tensor, leaf))
        return leaf

    def carry_gradients_back(self):
        """After the engine ran: dL/dh0 of the engine's leaves to the caller's h0, into .grad
        of a leaf, and with dL/dx and dL/dy (engine_leaf_for) back through the graph of what
        was computed from other tensors (a learned initial state, an encoder's x and y)
        in one backward, as autograd would carry them had the engine taken them itself."""
        pending = [(tensor, leaf.grad) for tensor, leaf in self._graphs_to_enter
                   if leaf.grad is not None]
        if self.h0 is not None and self.engine is not None and \
                any(t.grad is not None for t in self.engine_h0):
            grads = self.engine.from_engine([t.grad if t.grad is not None
                                             else torch.zeros_like(t) for t in self.engine_h0])
            for tensor, grad in zip(self.h0, grads):
                if tensor.is_leaf and tensor.requires_grad:
                    tensor.grad = grad if tensor.grad is None else tensor.grad + grad
                elif tensor.requires_grad:
                    pending.append((tensor, grad))
        if pending:
            torch.autograd.backward([t for t, _ in pending], [g for _, g in pending])

    @property
    def calls_user_code(self):
        """Whether the engine calls the user's rnn itself (not a C++ model or the cells
        computing a stock module's function), so its cuts are the module's business."""
        return self.block is not None

    def observations(self):
        """What the user's rnn was seen doing, in plain words (BlockFunction.observations)."""
        return sorted(getattr(self.block, "observations", ()))

    def engine_args(self):
        b = self.batch
        return dict(model=self.model, head=self.head, inputs=self.engine_inputs,
                    targets=self.engine_targets, lengths=b.lengths, h0=self.engine_h0,
                    resets=self.resets)

    def final_state(self, tensors):
        if self.engine is not None:
            tensors = self.engine.from_engine(tensors)
        return self.layout.to_module(tensors)


# Steps VLRNN's first-call check runs (check_cuts): two pieces of several steps each, and a
# cost beside the call's own of a few steps' forward passes.
CUT_CHECK_STEPS = 32


def _tolerance_for(dtype):
    """Relative difference beyond which a check calls two results different: the verifier's
    own (verify::tolerance_for: 1e-10 in float64, 1e-5 in float32, 4 ε in bfloat16 and
    float16, where one rounding moves a result by more)."""
    return _C.tolerance_for(torch.empty(0, dtype=dtype))


def _relative(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-300)).item()


def _head_cut_dependence(call, steps, seed, tolerance):
    """The head's share of the check: its per-step losses on z [steps, B, Z] in one call
    and in two, from one generator state; a diagnosis when they differ, else ''."""
    b, cut = call.batch, steps // 2
    z = torch.randn(steps, b.batch_size, call.z_size, dtype=b.inputs.dtype,
                    generator=torch.Generator().manual_seed(seed)).to(b.inputs.device)
    y = b.targets[:steps]  # [steps, B, ...]
    losses = call.head_function  # time-major, its result checked
    with torch.no_grad(), _rng_kept(b.inputs.device):
        torch.manual_seed(seed)
        whole = losses(z, y)
        torch.manual_seed(seed)
        pieces = torch.cat([losses(z[:cut], y[:cut]), losses(z[cut:], y[cut:])])
    by = _relative(pieces, whole)
    if not by > tolerance:
        return ""
    return (f"the head's per-step losses depend on where the sequence is cut into blocks: "
            f"from the same generator state, one call on steps [0, {steps}) and two on "
            f"[0, {cut}) and [{cut}, {steps}) differ by {by:.2e} (relative); if it draws random "
            "numbers (dropout), draw them one step at a time")


def cut_dependence(call, seed=0):
    """VLRNN's first-call check (check_cuts) on the batch's first CUT_CHECK_STEPS steps:
    vlrnn verify's cut-dependence test of the model, and the same of the head. Returns
    {'diagnosis': why the outputs depend on the cut, 'warning': a pass that holds only for
    this generator's layout}, empty strings when neither."""
    b = call.batch
    found = {"diagnosis": "", "warning": ""}
    steps = min(b.time_steps, CUT_CHECK_STEPS)
    if steps < 2:
        return found
    with _C.ExactFloat32():  # NOTE [ Float32 without TF32 ] (vlrnn/core/exact_float32.h)
        found = _cut_dependence(call, steps, seed, found)
    if found["diagnosis"]:
        found["diagnosis"] += _compiled_random_draws_hint(call.rnn, call.out)
    return found


# NOTE [ Compiled modules draw their own random numbers ]
# Under torch.compile, inductor (its default backend) draws a compiled graph's random
# numbers its own way, from one seed per graph, and compiles one graph without gradients
# and another with them: dropout's masks then follow neither eager PyTorch's generator nor
# one another, and no replay of the generator's state makes a block's recomputation draw
# what its pass without gradients drew. The first-call check refuses such a module (its
# gradients differ cut or whole); this names the cause and the fix, fallback_random, which
# makes inductor draw as eager PyTorch does, exact under any cut (test_compiled_modules.py).
def _compiled_random_draws_hint(*modules):
    """The fix to name when a refused module is torch.compile'd and inductor draws its
    random numbers, else ''."""
    compiled = any(is_compiled(m) for module in modules for m in module.modules())
    inductor = sys.modules.get("torch._inductor.config")
    if not compiled or getattr(inductor, "fallback_random", False):
        return ""
    return ("; the module is torch.compile'd: if it draws random numbers (dropout), inductor "
            "draws them per compiled graph, not as eager PyTorch does, and no block method "
            "can replay them. torch._inductor.config.fallback_random = True makes it draw "
            "them as eager PyTorch does")


def _one_ended_at_the_cut(lengths, cut, order):
    """lengths [B] (clamped to the check's steps) with one sequence ending at `cut`: the
    last in the caller's packing order `order` [B] (longest first), so that the order holds
    and every other sequence runs on past the cut."""
    ended = lengths.clone()
    ended[int(order[-1])] = cut
    return ended


def _batch_composition_diagnosis(cut_dependence, steps):
    cut, by = cut_dependence["cut"], cut_dependence["here"]
    return (f"the rnn's outputs for a sequence depend on which other sequences share its call: "
            f"VLRNN calls it block by block with the sequences still running (a "
            f"PackedSequence of those), and with a sequence ending by step {cut}, one call on "
            f"steps [0, {steps}) and two on [0, {cut}) and [{cut}, {steps}) differ by {by:.2e} "
            f"(relative), where with every sequence running through they agree. Compute "
            "nothing across the batch of the padded sequence (statistics over the batch "
            "dimension): at each step, only over the sequences the PackedSequence holds there")


def _model_cut_dependence(call, steps, seed, lengths, h0):
    """_C.cut_dependence of the rnn on the batch's first `steps` steps (`lengths` clamped
    to them, `h0` detached); on a packed batch, told apart from a dependence on the batch's
    composition."""
    b = call.batch
    def measured(lengths):
        return _C.cut_dependence(model=call.model, head=call.head,
                                 inputs=b.inputs[:steps].detach(), targets=b.targets[:steps],
                                 lengths=lengths, h0=h0, seed=seed)
    found = measured(lengths)
    if lengths is None or lengths.numel() < 2:
        return found
    # NOTE [ Sequences leave the rnn's calls ]: a packed batch reaches the rnn block by block
    # as the sequences still running, so a sequence that ended leaves the later calls, where
    # one call on the whole batch still pads it in. A module that computes across the batch
    # of the padded sequence sees another batch then, and its output differs: a cut with no
    # sequence ending by it cannot show that, and a cut with one cannot tell it from
    # per-call dropout. So a failing check runs again with every sequence running through
    # (the padding's zeros as inputs): passing there, the composition is the cause. A passing
    # one with no sequence ending by the cut runs again with one ending there.
    cut = steps // 2
    if found["diagnosis"]:
        through = measured(torch.full_like(lengths, steps))
        if not through["diagnosis"]:
            found["diagnosis"] = _batch_composition_diagnosis(found, steps)
    elif not bool((lengths <= cut).any()):
        ended = measured(_one_ended_at_the_cut(lengths, cut, b.sort_order()))
        if ended["diagnosis"]:
            found["diagnosis"] = _batch_composition_diagnosis(ended, steps)
    return found


def _grad_mode_diagnosis(call, steps, seed, tolerance, lengths, entry):
    """The rnn on the batch's first `steps` steps from its entry state, once without
    gradients (as the engine's pass that stores states runs it) and once with (as a block
    is recomputed), from one generator state: a diagnosis when they differ, else ''.
    NOTE [ One function with and without gradients ]: the states a block method stores come
    from the pass without gradients, and each block's gradient from a recomputation with
    them; a module that computes another function without gradients (an inference fast
    path) would have its gradients taken at states its training function never reaches."""
    b = call.batch
    x = b.inputs[:steps].detach()
    runs = []
    with _rng_kept(b.inputs.device):
        for mode in (torch.no_grad, torch.enable_grad):
            torch.manual_seed(seed)
            with mode(), onednn_as_the_engine_runs_it():
                z, h = call.block(x, tuple(entry), lengths)
            runs.append([z.detach()] + [t.detach() for t in h])
    by = max(_relative(got, want) for got, want in zip(*runs) if got.is_floating_point())
    if not by > tolerance:
        return ""
    return (f"the rnn computes another function without gradients than with them: on steps "
            f"[0, {steps}), from one generator state, its outputs under torch.no_grad() and "
            f"with gradients differ by {by:.2e} (relative). A block method stores each block's "
            "entry state from a pass without gradients and recomputes the block with them, "
            "so the gradient would be taken at states the computation with gradients never "
            "reaches; compute the same function in both modes (no inference-only fast path)")


# NOTE [ Half precision and the cut ]
# In bfloat16 and float16 the gradients of one call and of two chained differ by rounding
# alone by more than a float32 bound (nn.LSTM in bfloat16: 1.8e-2, 2.3 ε), so 1e-5 refused
# every module there. What the check looks for, a gradient that does not cross the cut,
# shows as a tensor's chained gradient equal to its `stopped` one, with nothing handed
# across (bit for bit where a module detaches its state). So there each tensor passes
# within 4 ε (_tolerance_for) or within a quarter of its distance from `stopped`, which
# grows with the model while rounding does too (measured, nn.LSTM's weight_hh: 1.8e-2
# against 0.21). A tensor whose gradient stops at the cut is refused unless all it misses
# is within 4 ε.
def _gradient_cut_diagnosis(call, steps, seed, tolerance, lengths, entry):
    """The rnn's gradients on the batch's first `steps` steps (of its parameters, its entry
    state and x where the call asks for dL/dx, for random weights on its outputs z and
    final state h), from one call and from two chained as the engine chains blocks, from
    one generator state: a diagnosis when they differ, else ''.
    NOTE [ Gradients cross the cut ]: the engine back-propagates each block from the
    gradient of its exit state, and carries what reaches its entry state to the block
    before. Outputs that agree cut or whole do not make that exact: a module that detaches
    the state it is given (h.detach() in forward, as truncated BPTT does between calls)
    computes the same outputs, but no gradient crosses a block's start, which one call on
    the whole sequence carries. Only gradients show it, so the check compares them too."""
    b, cut = call.batch, steps // 2
    device, dtype = b.inputs.device, b.inputs.dtype
    parameters = [p for p in call.rnn_parameters if p.requires_grad]
    count = len(parameters)
    # dL/dx too, where the call asks for it (an encoder before the rnn).
    x, with_x = b.inputs[:steps].detach(), int(b.inputs.requires_grad)

    def leaves(tensors):
        return [t.detach().requires_grad_() for t in tensors]

    def run(x, state, lengths):
        with onednn_as_the_engine_runs_it():
            z, h = call.block(x, tuple(state), lengths)
        return [z] + list(h)

    def gradients(outputs, weights, inputs, retain=False):
        pairs = [(o, w) for o, w in zip(outputs, weights) if o.requires_grad]
        if not pairs:
            return [torch.zeros_like(t) for t in inputs]
        found = torch.autograd.grad([o for o, _ in pairs], inputs, [w for _, w in pairs],
                                    allow_unused=True, retain_graph=retain)
        return [torch.zeros_like(t) if g is None else g for t, g in zip(inputs, found)]

    def lengths_within(low, high):
        return None if lengths is None else (lengths - low).clamp(min=0, max=high - low)

    # Autocast off: its lower precision sums the pieces' gradients in another order, and
    # what the check looks for is where gradients flow, which no precision changes. The
    # parameters' hooks held: 2.x calls them on what torch.autograd.grad returns for them.
    with _rng_kept(device), torch.enable_grad(), torch.autocast(device.type, enabled=False), \
            gradient_hooks_held(parameters):
        torch.manual_seed(seed)
        start = leaves(entry)
        xs = leaves([x]) if with_x else [x]
        outputs = run(xs[0], start, lengths)
        generator = torch.Generator().manual_seed(seed)
        weights = [torch.randn(o.shape, dtype=dtype, generator=generator).to(device)
                   for o in outputs]  # [steps, B, Z], then each state tensor's shape
        whole = gradients(outputs, weights, parameters + start + xs[:with_x])

        torch.manual_seed(seed)
        start = leaves(entry)
        xs = [x[:cut], x[cut:]]
        xs = leaves(xs) if with_x else xs
        first = run(xs[0], start, lengths_within(0, cut))
        middle = leaves(first[1:])
        second = run(xs[1], middle, lengths_within(cut, steps))
        later = gradients(second, [weights[0][cut:]] + weights[1:],
                          parameters + middle + xs[1:1 + with_x])
        half = torch.finfo(dtype).eps > torch.finfo(torch.float32).eps
        earlier = gradients(first, [weights[0][:cut]] + later[count:count + len(middle)],
                            parameters + start + xs[:with_x], retain=half)
        # NOTE [ Half precision and the cut ]: nothing handed across the cut.
        stopped = gradients(first, [weights[0][:cut]] + [torch.zeros_like(t) for t in middle],
                            parameters + start + xs[:with_x]) if half else None

    def joined(first_part):  # the whole sequence's gradients from the two calls' parts
        out = [a + b for a, b in zip(first_part[:count], later[:count])] + \
            first_part[count:count + len(start)]
        return out + [torch.cat([first_part[-1], later[-1]])] if with_x else out

    def from_whole(got):  # per tensor: its relative distance from one call's gradient
        # Dense: an embedding's sparse=True gradient has no abs().max().
        pairs = [(g.to_dense().double(), w.to_dense().double()) for g, w in zip(got, whole)]
        return [_relative(g, w) if w.abs().max() > 0 or g.abs().max() > 0 else 0.0
                for g, w in pairs]

    each = from_whole(joined(earlier))
    bounds = [tolerance] * len(each) if not half else \
        [max(tolerance, crossing / 4) for crossing in from_whole(joined(stopped))]
    by = max(each, default=0.0)
    if all(d <= bound for d, bound in zip(each, bounds)):
        return ""
    of = "its parameters, its entry state and x" if with_x else \
        "its parameters and its entry state"
    return (f"the rnn's gradients depend on where the sequence is cut into blocks, though its "
            f"outputs do not: on steps [0, {steps}), from one generator state, the gradients "
            f"of {of} from one call and from two chained at step {cut} differ by {by:.2e} "
            "(relative). VLRNN back-propagates each block from its exit state's gradient to "
            "its entry state's and x's, so a module must let the gradient through what it is "
            "given, whatever step a call starts at (no h.detach() in forward: detach between "
            "calls, outside the module, for truncated BPTT)")


def _cut_dependence(call, steps, seed, found):
    b = call.batch
    tolerance = _tolerance_for(b.inputs.dtype)
    if call.calls_user_code:  # else the rnn is C++ or the cells: exact under any cut
        lengths = None if b.lengths is None else b.lengths.clamp(max=steps)
        h0 = None if call.engine_h0 is None else [t.detach() for t in call.engine_h0]
        found = _model_cut_dependence(call, steps, seed, lengths, h0)
        if not found["diagnosis"]:
            # The entry state both checks start from: h0, or zeros as the engine starts.
            entry = h0 if h0 is not None else \
                [b.inputs.new_zeros(shape) for shape in call.layout.shapes_for(b.batch_size)]
            found["diagnosis"] = _grad_mode_diagnosis(call, steps, seed, tolerance, lengths,
                                                      entry) or \
                _gradient_cut_diagnosis(call, steps, seed, tolerance, lengths, entry)
    diagnosis = found["diagnosis"] or _head_cut_dependence(call, steps, seed, tolerance)
    return {"diagnosis": diagnosis, "warning": found["warning"]}
