"""What a long VLRNN call tells its caller (NOTE [ Progress of a long call ] in
vlrnn/include/vlrnn/methods/progress.h): a RuntimeWarning up front when the schedule
recomputes far more than the sequence's length, and a line on stderr now and then once the
call has run for a while."""
import sys
import time

from ._compat import warn_caller

# A schedule recomputing more than this many times T forward steps is quadratic in practice:
# revolve picks slot counts below it, and uniform blocks recompute at most T.
SUPERLINEAR_RECOMPUTATION = 64
# A call prints its first progress line after this many seconds, then one per interval.
FIRST_LINE_SECONDS = 10.0
LINE_INTERVAL_SECONDS = 10.0
# The engine reports its advance at most this often (each report takes the GIL).
REPORT_SECONDS = 0.25


def progress_args(spec, enabled):
    """The engine's progress arguments (_C.compute's progress, progress_interval)."""
    return {"progress": CallProgress(spec) if enabled else None,
            "progress_interval": REPORT_SECONDS}


class CallProgress:
    """The engine's progress callable for one call: progress('planned', schedule, T,
    forward_steps), then progress('advanced', done)."""

    def __init__(self, spec, stream=None):
        self.spec = spec
        self.stream = stream if stream is not None else sys.stderr
        self.total = 0
        self.schedule = spec
        self.start = time.monotonic()
        self.next_line = self.start + FIRST_LINE_SECONDS

    def __call__(self, event, *args):
        if event == "planned":
            self.schedule, time_steps, self.total = args
            recomputed = self.total - time_steps
            if recomputed > SUPERLINEAR_RECOMPUTATION * time_steps:
                warn_caller(
                    f"vlrnn: method {self.spec!r} ({self.schedule}) will run {self.total:,} "
                    f"forward steps for T = {time_steps:,}, recomputing {recomputed / time_steps:,.0f} "
                    "times the sequence: its recomputation grows faster than T (e.g. revolve "
                    "with few slots). More slots, longer blocks or 'planner:percent=P' cost "
                    "far less time", RuntimeWarning)
        elif event == "advanced":
            now = time.monotonic()
            if now >= self.next_line and self.total:
                done = args[0]
                elapsed = now - self.start
                left = elapsed * (self.total - done) / max(done, 1)
                print(f"vlrnn: {self.schedule}: {done:,} of {self.total:,} forward steps "
                      f"({100 * done / self.total:.1f} %), {elapsed:.0f} s, about {left:.0f} s "
                      "left", file=self.stream, flush=True)
                self.next_line = now + LINE_INTERVAL_SECONDS
