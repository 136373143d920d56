"""Figure of a `vlrnn compare --json FILE` file: several methods on one workload, side by
side (experiments/commands/compare_command.cpp writes it through the results writer: a
result set in one file, {"meta": ..., "records": [one per method]}).

  compare   left: time per iteration per method, the median of the repeats; bar: their
            spread (IQR with 5 or more repeats, else min-max); each labelled with its paired
            time ratio to full BPTT and the ratio's 95 % interval, hatched and marked * where
            that is wider than ±10 % (noisy). Right: the iteration peak memory per method
            (exact tensor bytes above parameters + data; log), labelled with full BPTT's over
            the method's. A run that failed (out of memory, an error) is named with its
            status instead of a bar.
"""
import json
import math
import re
import textwrap

from . import stats
from .common import plt, save, spread_name, yerr

NAME = "compare"
UNITS = ((1024.0 ** 3, "GiB"), (1024.0 ** 2, "MiB"), (1024.0, "KiB"), (1.0, "bytes"))


def load(path):
    """(meta, records) of a compare file; exits naming the file and what it holds when it is
    not one."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"plot.py: {path}: expected a `vlrnn compare --json` file, "
                         f"could not read it as JSON: {error}")
    records = data.get("records") if isinstance(data, dict) else None
    if not isinstance(records, list) or not isinstance(data.get("meta"), dict) or \
            any(r.get("kind") != "compare" for r in records):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise SystemExit(f"plot.py: {path}: expected a `vlrnn compare --json` file (an object "
                         f"with meta and records of kind compare), got another (it holds: "
                         f"{found})")
    return data["meta"], records


def workload(p):
    """The workload as `vlrnn compare` prints it: "lstm L=1 F=4 H=16 ce C=16 T=64 B=4 float32 cpu"."""
    layers = f" L={p['layers']}" if "layers" in p else ""  # a model file's: not known
    return (f"{p['model']}{layers} F={p['input']} H={p['H']} {p['head']} "
            f"C={p['classes']} T={p['T']} B={p['B']} {p['dtype']} {p['device']}")


def byte_unit(largest):
    return next((scale, unit) for scale, unit in UNITS if largest >= scale or scale == 1.0)


def time_unit(largest):
    return (1.0, "s") if largest >= 1.0 else (1e-3, "ms") if largest >= 1e-3 else (1e-6, "µs")


def ratio_words(run):
    """" x1.14 [1.08-1.21]" with " *" where noisy; "" without a ratio (full failed)."""
    if run.get("method_name") == "full":
        return " (the reference)"
    value = run.get("paired_time_ratio_to_full")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    ci = run.get("paired_time_ratio_ci")
    words = f" x{value:.2f}"
    if ci and None not in ci:
        words += f" [{ci[0]:.2f}-{ci[1]:.2f}]"
    return words + (" *" if run.get("time_ratio_noisy") else "")


def draw_time(ax, runs, failed_y):
    ok = [(y, r) for y, r in enumerate(runs) if r.get("status") == "ok"]
    summaries = [r["time_s"] for _, r in ok]
    scale, unit = time_unit(max(s["max"] for s in summaries))
    medians = [s["median"] / scale for s in summaries]
    lows, highs = zip(*[[v / scale for v in stats.spread(s)[:2]] for s in summaries])
    bars = ax.barh([y for y, _ in ok], medians, xerr=yerr(medians, lows, highs),
                   color="tab:blue", alpha=0.8, capsize=3, ecolor="0.2")
    for bar, (_, run), high in zip(bars, ok, highs):
        if run.get("time_ratio_noisy") and run.get("method_name") != "full":
            bar.set_facecolor("white")
            bar.set_edgecolor("tab:blue")
            bar.set_hatch("////")
        ax.text(high, bar.get_y() + bar.get_height() / 2, ratio_words(run), va="center",
                fontsize=7)
    for y in failed_y:
        # LibTorch's "[enforce fail at alloc_cpu.cpp:75] err == 0. " says nothing to a reader.
        error = re.sub(r"^\[enforce fail[^\]]*\]\s*(err == 0\.\s*)?", "", runs[y].get("error", ""))
        error = textwrap.shorten(error, 90, placeholder=" ...")
        ax.text(0, y, f" {runs[y]['status']}: {error}", va="center", fontsize=7,
                color="tab:red")
    ax.set_xlim(0, max(highs) * 1.6)  # room for the ratio labels right of the bars
    ax.set_xlabel(f"time per iteration ({unit}, median)")
    ax.set_title(f"time, ratio to full BPTT [95 % CI] (* noisy)\n({spread_name(summaries)})",
                 fontsize=9)
    return summaries


def draw_memory(ax, runs, failed_y):
    ok = [(y, r) for y, r in enumerate(runs) if r.get("status") == "ok"]
    peaks = [max(r["memory"]["iteration_peak_bytes"], 1) for _, r in ok]
    scale, unit = byte_unit(max(peaks))
    ax.barh([y for y, _ in ok], [p / scale for p in peaks], color="tab:orange", alpha=0.8)
    for (y, run), peak in zip(ok, peaks):
        ratio = run.get("memory_ratio_full_to_this") if run.get("method_name") != "full" else None
        words = f" {peak / scale:.3g} {unit}" + (f" (full / this: {ratio:.3g})" if ratio else "")
        ax.text(peak / scale, y, words, va="center", fontsize=7)
    for y in failed_y:
        ax.text(0.02, y, f" {runs[y]['status']}", va="center", fontsize=7, color="tab:red",
                transform=ax.get_yaxis_transform())
    ax.set_xscale("log")
    # The longest bar ends at 55 % of the (log) axis: the rest is room for its label.
    low = min(peaks) / scale / 2
    ax.set_xlim(low, low * (max(peaks) / scale / low) ** (1 / 0.55))
    workload_bytes = next((r["memory"].get("workload_bytes") for _, r in ok), None)
    ax.set_xlabel(f"iteration peak memory ({unit}, log)")
    ax.set_title("iteration peak: tensor bytes above the "
                 + (f"{workload_bytes / scale:.3g} {unit} of " if workload_bytes else "")
                 + "parameters + data", fontsize=9)


def draw(meta, runs, out_dir, written, skipped):
    if not any(r.get("status") == "ok" for r in runs):
        return skipped.append(f"{NAME} (no method ran to completion: "
                              f"{', '.join(r.get('method', '?') + ' ' + r.get('status', '?') for r in runs)})")
    failed_y = [y for y, r in enumerate(runs) if r.get("status") != "ok"]
    fig, (time_ax, memory_ax) = plt.subplots(1, 2, figsize=(11.0, 2.6 + 0.4 * len(runs)),
                                             sharey=True)
    draw_time(time_ax, runs, failed_y)
    draw_memory(memory_ax, runs, failed_y)
    time_ax.set_yticks(range(len(runs)))
    time_ax.set_yticklabels([r["method_description"] for r in runs],
                            fontsize=8)
    time_ax.set_ylim(len(runs) - 0.5, -0.5)  # in the order of --methods, top down
    for ax in (time_ax, memory_ax):
        ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.suptitle(f"vlrnn compare: {workload(meta['problem'])}", fontsize=10)
    save(fig, None, NAME, meta, written,
         f"{meta['timed_rounds']} rounds after {meta['warmup']} warm-up; methods take turns within "
         f"each round. Ratio: median over rounds of time / full BPTT's time in the same round, "
         f"95 % bootstrap interval; * hatched: wider than ±{stats.NOISY_HALF_WIDTH:.0%} or fewer "
         f"than 3 rounds, not a finding.", into=out_dir)
    return None
