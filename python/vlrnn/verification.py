"""vlrnn.verify: a user's modules, every exact method against full BPTT, as `vlrnn verify`.

    report = vlrnn.verify(rnn, out, x, y)        # the rows `vlrnn verify` prints
    print(report)                                # the same table
    report.assert_exact()                        # AssertionError with the table on a failure
    vlrnn.assert_exact(rnn, out, x, y)           # both at once, for a pytest suite

Each method runs on the same weights, data and generator state as full BPTT, and the loss,
per-step losses, every gradient (parameters, h0 and x when they require grad) and the final
state are compared: relative to each tensor's largest entry, within 1e-10 in float64 and
1e-5 in float32. A failing row says in plain words what the module likely breaks (e.g.
dropout masks drawn once per call instead of once per step). A module that passes here but
draws its random numbers once per call gets report.warning: such a pass does not carry over
to a GPU.
"""
from typing import NamedTuple

from . import _C
from ._compat import warn_caller
from ._engine import EngineCall, autocast_cache_off, gradient_hooks_held, interrupts_kept, \
    reduction_of

# Blocks of every size class (2 and 7 blocks, one step), checkpointing, revolve and the
# planner; every one exact.
DEFAULT_METHODS = ("vlrnn:num_blocks=2", "vlrnn:num_blocks=7", "vlrnn:block_length=1", "checkpoint",
                   "revolve", "planner:percent=20")
# For a bidirectional rnn: the exact methods that handle one.
BIDIRECTIONAL_METHODS = ("bivlrnn:num_blocks=2", "bivlrnn:num_blocks=7", "bivlrnn:block_length=1",
                         "checkpoint")


class VerifyRow(NamedTuple):
    case: str
    method: str
    max_abs: float      # largest |method - full| over every tensor
    max_rel: float      # the same, relative to each tensor's largest entry
    worst: str          # the tensor with the largest max_rel
    tolerance: float
    exact: bool         # False: an approximation (tbptt), reported, never failed
    passed: bool
    error: str          # the method's error, when it raised
    diagnosis: str      # on a failure, the likely cause in plain words
    grad_rel_error: float
    grad_cosine: float


class VerifyReport(list):
    """What vlrnn.verify found: a list of VerifyRow, one per (case, method).

    Each row: case and method (the spec run); max_abs / max_rel, the largest difference from
    full BPTT over the loss, per-step losses, final state and every gradient (max_rel
    relative to each tensor's largest entry) and worst, the tensor where max_rel is; the
    tolerance it was held to (1e-10 in float64, 1e-5 in float32, 4 ε of bfloat16 or float16:
    3.1e-2, 3.9e-3); exact (False for an approximation such as tbptt, reported but never
    failed); passed; error (the method's exception, when it raised); diagnosis (on a failure, the likely cause in plain words);
    grad_rel_error and grad_cosine (all gradients as one vector against full BPTT's).

    passed: every exact row passed; failures(): the exact rows that did not; assert_exact():
    AssertionError with the table when any failed; str(report): the table `vlrnn verify`
    prints, its summary line, and the warning and notes below.
    warning: non-empty when the module passes here but draws its random numbers once per
    call: the pass does not carry over to a GPU or an MKL build, whose generators lay out one
    call's draw otherwise (also issued as a RuntimeWarning). notes: what the module was seen
    doing that may explain a failure (e.g. packing its output in another order)."""

    def __init__(self, rows, table, summary, warning="", notes=()):
        super().__init__(rows)
        self.table, self.summary, self.warning = table, summary, warning
        self.notes = list(notes)

    @property
    def passed(self):
        return all(row.passed or not row.exact for row in self)

    def failures(self):
        return [row for row in self if row.exact and not row.passed]

    def assert_exact(self):
        if not self.passed:
            raise AssertionError(f"gradients differ from full BPTT:\n{self}")

    def __str__(self):
        warning = f"WARNING: {self.warning}\n" if self.warning else ""
        notes = "".join(f"note: {note}\n" for note in self.notes)
        return warning + self.table + self.summary + "\n" + notes


def verify(rnn, out, x, y, h0=None, methods=None, loss_scaling="MEAN", seed=1234,
           fast_cells=True, resets=None):
    """Every method of `methods` (specs; default DEFAULT_METHODS, or BIDIRECTIONAL_METHODS for
    a bidirectional rnn) against full BPTT on
    rnn and out with the batch (x, y), h0 and resets, as VLRNN(..., fast_cells=fast_cells)
    calls them. Gradients are computed into .grad on the way (zeroed first), with the tensors'
    gradient hooks held off, so that what is compared is each method's own gradient; nothing
    else changes."""
    if methods is not None and (isinstance(methods, str)
                                or not all(isinstance(m, str) for m in methods)):
        raise TypeError("methods: expected a list of method specs (str), e.g. "
                        f"['vlrnn:num_blocks=4', 'checkpoint'], got {methods!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed: expected a non-negative int, got {seed!r}")
    with autocast_cache_off(), interrupts_kept():
        call = EngineCall(rnn, out, x, y, h0, fast_cells, resets=resets)
        if methods is None:
            bidirectional = isinstance(call.model, _C.Bidirectional)
            methods = BIDIRECTIONAL_METHODS if bidirectional else DEFAULT_METHODS
        args = call.engine_args()  # x as a leaf of its own, when it requires grad: dL/dx
        # dL/dy is the head's at each step, on z, which the gradients compared depend on.
        args["targets"] = args["targets"].detach()
        with gradient_hooks_held(call.grad_tensors):  # the methods' own gradients
            result = _C.verify(reduction=reduction_of(loss_scaling), methods=list(methods),
                               seed=seed, label=type(rnn).__name__,
                               head_label=type(out).__name__, **args)
    rows = [VerifyRow(**row) for row in result["rows"]]
    notes = call.observations()
    if notes:  # beside a failure, what the module was seen doing may be its cause
        rows = [row if row.passed or not row.exact else
                row._replace(diagnosis="; ".join(filter(None, [row.diagnosis, *notes])))
                for row in rows]
    report = VerifyReport(rows, result["table"], result["summary"], result["warning"], notes)
    if report.warning:
        warn_caller(f"vlrnn.verify: {report.warning}", RuntimeWarning)
    return report


def assert_exact(rnn, out, x, y, h0=None, methods=None, loss_scaling="MEAN", seed=1234,
                 fast_cells=True, resets=None):
    """verify(), raising AssertionError with the table when any exact method differs."""
    report = verify(rnn, out, x, y, h0, methods, loss_scaling, seed, fast_cells, resets)
    report.assert_exact()
    return report
