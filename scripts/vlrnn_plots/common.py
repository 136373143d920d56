"""What every figure shares: loading a result folder, the provenance footer, saving, styles.

Every figure ends with a footer naming the command (or config) that measured it, the commit
and the machine, read from the meta of the results schema (scripts/results_schema.py); a run
from a tree with uncommitted changes (meta.json `git_dirty` true) says DIRTY TREE, in the
footer and in red right above it, and one from code of unknown state ("unknown") says so too. Where the footer, titles and legends
go: layout.py.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

import results_schema  # noqa: E402  (scripts/, on plot.py's path)

from . import layout, stats  # noqa: E402

MIB = 1024.0 * 1024.0
# One colour per method name, stable across figures; unknown methods take the cycle.
COLORS = {"full": "black", "vlrnn": "tab:blue", "checkpoint": "tab:orange",
          "tbptt": "tab:green", "planner": "tab:red", "uniform": "tab:blue",
          "revolve": "tab:green", "sqrt": "tab:orange", "bivlrnn": "tab:purple"}
MARKERS = {"full": "s", "vlrnn": "o", "checkpoint": "^", "tbptt": "D", "planner": "o",
           "uniform": "s", "revolve": "^", "sqrt": "D", "bivlrnn": "P"}
FALLBACK = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
# Formats written for each figure; VLRNN_PLOT_FORMATS=png (the test) writes fewer.
FORMATS = tuple(f for f in os.environ.get("VLRNN_PLOT_FORMATS", "png,pdf").split(",") if f)


def load(directory):
    """(records, meta) of a result folder; a torn last line (an interrupted write) is skipped."""
    path = results_schema.records_path(directory)
    if path is None:
        path = os.path.join(directory, "results.jsonl")
        sys.exit(f"plot.py: {path} does not exist. A result folder holds results.jsonl and "
                 f"meta.json: `build/vlrnn sweep CONFIG --out DIR`, `build/vlrnn budget --out DIR`, "
                 f"`build/vlrnn verify --out DIR`, or a benchmark folder converted with "
                 f"`python3 scripts/bench_to_records.py DIR`.")
    records = []
    with results_schema.open_records(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"plot.py: warning: {path} line {number} is not a whole record; skipped",
                      file=sys.stderr)
    meta = {}
    meta_path = os.path.join(directory, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    return records, meta


def command_of(meta):
    """The command that made the set, as its meta records it."""
    env = " ".join(f"{k}={v}" for k, v in sorted((meta.get("env") or {}).items()))
    return (env + " " if env else "") + meta["command"]


def tree_warning(meta):
    """What the footer says in red about the code that measured, or "" for a clean commit:
    uncommitted changes, or a tree the tool could not see (git_dirty "unknown": never clean)."""
    if meta["git_dirty"] is True:
        return "DIRTY TREE: measured with uncommitted changes"
    if meta["git_dirty"] != False:  # noqa: E712 (false, not merely falsy)
        return "UNKNOWN TREE: the code that measured is not known to be a commit"
    return ""


def caption(meta):
    """The provenance footer: command or config, commit, machine, libraries."""
    sha = str(meta["git_sha"])
    short = sha[:10] if sha != "unknown" else sha
    state = {True: " DIRTY TREE (uncommitted changes)", False: ""}.get(
        meta["git_dirty"], " UNKNOWN TREE STATE")
    parts = []
    if meta.get("config_path"):
        parts.append(f"config {meta['config_path']} ({meta.get('config_name', '?')})")
    parts.append(f"command: {command_of(meta)}")
    parts.append(f"git {short}{state}")
    devices = "; ".join((meta.get("devices") or {}).values())
    parts.append(devices or f"{meta['cpu_model']}, {meta['nproc']} cores")
    parts.append(f"BLAS {meta['blas']['vendor']}")
    threads = meta.get("torch_threads")
    if threads not in (None, ""):
        parts.append(f"LibTorch threads {threads}")
    parts.append(f"LibTorch {meta['libtorch_version']}")
    peak = ", ".join(f"{k} {v['flops_per_s'] / 1e9:.0f} GFLOP/s"
                     for k, v in (meta.get("peak_gemm") or {}).items())
    if peak:
        parts.append(f"peak GEMM {peak}")
    if meta.get("load_average"):
        parts.append(f"load {meta['load_average']}")
    if meta.get("finished"):
        parts.append(str(meta["finished"]))
    elif meta.get("started"):
        parts.append(f"started {meta['started']}")
    shards = meta.get("merged_from")
    if shards:
        parts.append(f"merged from {len(shards)} shards (peak GEMM of the first)")
    return " | ".join(parts)


def save(fig, directory, name, meta, written, note="", into=None):
    """Adds the footer (note first, then the provenance), lays the figure out so that its
    text stays on the canvas and its legends off the data (layout.arrange), and writes
    INTO/NAME.{png,pdf}, INTO by default DIRECTORY/figures."""
    footer = [fig.text(0.01, 0.005, (note + "\n" if note else "") + caption(meta),
                       fontsize=6, color="0.3", ha="left", va="bottom")]
    if tree_warning(meta):
        # Right above the footer, where no suptitle or legend can lie over it.
        footer.append(fig.text(0.01, 0.0, tree_warning(meta), color="red", fontsize=8,
                               fontweight="bold", ha="left", va="bottom"))
    layout.arrange(fig, footer)
    out = into or os.path.join(directory, "figures")
    os.makedirs(out, exist_ok=True)
    for ext in FORMATS:
        # No creation date in a PDF: the same records give the same bytes, so redrawing a
        # committed folder leaves git status clean.
        fig.savefig(os.path.join(out, f"{name}.{ext}"), dpi=150,
                    metadata={"CreationDate": None} if ext == "pdf" else None)
    plt.close(fig)
    written.append(name)


def legend(ax, handles=None, labels=None, **options):
    """A legend that save() moves where it covers no data point (layout.legend)."""
    return layout.legend(ax, handles, labels, **options)


def shared_legend(axes, extra=(), **options):
    """One legend for panels that show the same things, on the last of them: the labelled
    artists of every panel, each label once, then the artists `extra` (keys drawn nowhere,
    such as noisy_legend_handle()). Beside the last panel a legend that has to move out of
    the axes leaves no gap between the panels."""
    handles, labels = [], []
    pairs = [pair for ax in axes for pair in zip(*ax.get_legend_handles_labels())]
    for handle, label in pairs + [(h, h.get_label()) for h in extra]:
        if label not in labels:
            handles.append(handle)
            labels.append(label)
    return legend(axes[-1], handles, labels, **options)


def method_style(name, order):
    if name in COLORS:
        return COLORS[name], MARKERS[name]
    index = order.index(name) if name in order else len(order)
    return FALLBACK[index % len(FALLBACK)], "v"


def order_key(method, order):
    return (order.index(method) if method in order else len(order), method)


def varying(records, keys):
    """The keys among `keys` that take more than one value in `records`."""
    return [k for k in keys if len({json.dumps(r.get(k)) for r in records}) > 1]


def describe_fixed(records, keys, varying_keys):
    parts = []
    for k in keys:
        if k in varying_keys:
            continue
        values = {json.dumps(r.get(k)) for r in records}
        if len(values) == 1 and records:
            v = records[0].get(k)
            if v is not None:
                parts.append(f"{k}={v}" if k not in ("dtype", "device", "model") else str(v))
    return ", ".join(parts)


def peak_bytes(memory):
    """The exact tensor bytes of one iteration above parameters + data."""
    return memory["iteration_peak_bytes"]


def time_summary(run):
    """The time summary (median, spread, samples_s) of a record, or of a budget record's
    `run`."""
    return run["time_s"]


def time_samples(run):
    """A record's (or a budget record's run's) repeats in the order they ran: round i of every
    method is sample i."""
    return run["time_s"]["samples_s"]


def yerr(values, lows, highs):
    """matplotlib's yerr (distances below, above) from values and their interval ends."""
    return [[max(v - lo, 0.0) for v, lo in zip(values, lows)],
            [max(hi - v, 0.0) for v, hi in zip(values, highs)]]


def spread_name(summaries):
    """The legend's words for the bars of a set of time summaries."""
    names = {stats.spread(s)[2] for s in summaries if s}
    counts = sorted({stats.count(s) for s in summaries if s})
    n = (f"n={counts[0]}" if len(counts) == 1 else f"n={counts[0]}-{counts[-1]}") if counts else ""
    if names == {"IQR"}:
        return f"bars: IQR of {n} repeats"
    if names == {"min-max"}:
        return f"bars: min-max of {n} repeats (fewer than {stats.IQR_MIN_SAMPLES})"
    return f"bars: IQR ({stats.IQR_MIN_SAMPLES}+ repeats) or min-max, {n}"


def plot_ratio_points(ax, xs, ratios, color, marker, label, linestyle="-"):
    """Ratio points with their intervals: filled markers, hollow where noisy; a point without
    an interval is drawn hollow too (nothing shows it is not noise)."""
    pts = sorted(zip(xs, ratios), key=lambda p: p[0])
    if not pts:
        return
    xs = [p[0] for p in pts]
    values = [p[1]["value"] for p in pts]
    lows = [p[1]["ci"][0] if p[1]["ci"] else p[1]["value"] for p in pts]
    highs = [p[1]["ci"][1] if p[1]["ci"] else p[1]["value"] for p in pts]
    ax.errorbar(xs, values, yerr=yerr(values, lows, highs), color=color, linestyle=linestyle,
                marker="none", capsize=3, lw=1.2, label=None)
    for x, v, p in zip(xs, values, pts):
        noisy = p[1]["noisy"]
        ax.plot([x], [v], marker=marker, color=color, ms=7, ls="none",
                markerfacecolor="white" if noisy else color, markeredgewidth=1.4)
    ax.plot([], [], marker=marker, color=color, ls=linestyle, label=label)


def noisy_legend_handle():
    return Line2D([], [], marker="o", color="0.3", markerfacecolor="white", ls="none",
                  label=f"noisy (CI > ±{stats.NOISY_HALF_WIDTH:.0%})")
