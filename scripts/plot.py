#!/usr/bin/env python3
"""Paper-style figures from a `vlrnn sweep` result folder.

    python3 scripts/plot.py DIR        # DIR holds results.jsonl and meta.json

Writes DIR/figures/<name>.png and .pdf:
  memory_vs_T            (a) step peak memory vs sequence length T per method, log-log
  time_vs_block          (b) time per gradient step vs block length K
  memory_vs_utilization  (c) step peak memory vs utilization, one curve per method,
                             points labelled by batch size
  max_batch              (d) largest batch and throughput under one memory budget, bars
  tbptt_error            (e) truncated BPTT's gradient error vs full BPTT, per window k
  verify_max_rel         from `vlrnn verify --out DIR` records (kind "verify"): the worst
                             relative difference to full BPTT of every exact case, per method
                             and dtype, against the tolerance

Each figure takes the records whose experiment lists it in "figures" (see
experiments/configs/quick.json); a figure without such records, or without the data it
needs, is skipped with a note, never an error. Every caption names the config file and the
git sha from meta.json. matplotlib only (Agg backend): no display needed.
"""

import json
import math
import os
import sys
from collections import defaultdict

try:
    import matplotlib
except ModuleNotFoundError:
    # Debian's python3-matplotlib serves /usr/bin/python3; a python3 first on PATH (a pyenv
    # shim) may not see it: run this script there instead.
    if os.path.exists("/usr/bin/python3") and \
            os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024.0 * 1024.0
# One colour per method name, stable across figures; unknown methods take the cycle.
COLORS = {"full": "black", "vlrnn": "tab:blue", "checkpoint": "tab:orange",
          "tbptt": "tab:green"}
MARKERS = {"full": "s", "vlrnn": "o", "checkpoint": "^", "tbptt": "D"}
FALLBACK = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]


def load(directory):
    path = os.path.join(directory, "results.jsonl")
    if not os.path.exists(path):
        sys.exit(f"plot.py: {path} does not exist (run `build/vlrnn sweep CONFIG --out {directory}` first)")
    records = []
    with open(path) as f:
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


def caption(meta):
    sha = meta.get("git_sha", "unknown")
    short = sha[:10] if sha != "unknown" else sha
    dirty = " (uncommitted changes)" if meta.get("git_dirty") else ""
    config = meta.get("config_path") or "?"
    devices = "; ".join(meta.get("devices", {}).values()) or "?"
    blas = meta.get("blas", {}).get("vendor", "?")
    peak = ", ".join(f"{k} {v['flops_per_s'] / 1e9:.0f} GFLOP/s"
                     for k, v in meta.get("peak_gemm", {}).items())
    when = meta.get("finished") or meta.get("started") or ""
    # A merged sweep (`vlrnn merge`): each record's utilization used its own shard's peak.
    shards = meta.get("merged_from")
    merged = f" | merged from {len(shards)} shards (peak GEMM of the first)" if shards else ""
    if "config_path" not in meta and meta.get("command"):  # a command, not a config (verify)
        return (f"{meta['command']} | git {short}{dirty} | {meta.get('cpu_model', '?')}, "
                f"{meta.get('nproc', '?')} cores | BLAS {blas} | "
                f"LibTorch {meta.get('libtorch_version', '?')}")
    return (f"config {config} ({meta.get('config_name', '?')}) | git {short}{dirty} | {devices} | "
            f"BLAS {blas} | peak GEMM {peak or '?'} | LibTorch {meta.get('libtorch_version', '?')} | {when}"
            f"{merged}")


def method_style(name, registry_order):
    if name in COLORS:
        return COLORS[name], MARKERS[name]
    index = registry_order.index(name) if name in registry_order else len(registry_order)
    return FALLBACK[index % len(FALLBACK)], "v"


def for_figure(records, figure):
    return [r for r in records if figure in (r.get("figures") or [])]


def ok(records):
    return [r for r in records if r.get("status") == "ok"]


def varying(records, keys):
    """The keys among `keys` that take more than one value in `records`."""
    return [k for k in keys if len({json.dumps(r.get(k)) for r in records}) > 1]


def label_of(record, extra_keys):
    label = record.get("method_description") or record.get("method")
    extras = [f"{k}={record.get(k)}" for k in extra_keys]
    return label + (" " + " ".join(extras) if extras else "")


def save(fig, directory, name, meta, written):
    fig.text(0.01, 0.005, caption(meta), fontsize=6, color="0.35", ha="left", va="bottom",
             wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    out = os.path.join(directory, "figures")
    os.makedirs(out, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(os.path.join(out, f"{name}.{ext}"), dpi=150)
    plt.close(fig)
    written.append(name)


def skip(name, why, skipped):
    skipped.append(f"{name} ({why})")


def plot_memory_vs_t(records, meta, directory, written, skipped, order):
    name = "memory_vs_T"
    tagged = for_figure(records, name)
    data = ok(tagged)
    if not data:
        return skip(name, "no records for it", skipped)
    extra = varying(data, ["model", "hidden", "layers", "B"])
    series = defaultdict(list)
    for r in data:
        # A method whose options derive from K (checkpoint's segments = T / K) describes
        # itself differently at every T: one curve per method and K, labelled by K.
        fixed_k = {**r, "method_description": f"{r['method_name']} (K={r['K']})"} if r.get("K") else r
        series[(r["method_name"], label_of(fixed_k, extra))].append(r)
    if not any(len({r["T"] for r in rs}) > 1 for rs in series.values()):
        return skip(name, "no method was measured at more than one T", skipped)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["T"])
        color, marker = method_style(method, order)
        ts = [r["T"] for r in rs]
        mib = [r["memory"]["step_peak_bytes"] / MIB for r in rs]
        ax.plot(ts, mib, marker=marker, color=color, label=label)
    # Points that ran out of memory: an x at the top of the axis, at their T.
    failed = [r for r in tagged if r.get("status") == "oom"]
    if failed:
        top = ax.get_ylim()[1]
        for r in failed:
            color, _ = method_style(r.get("method_name", r.get("method", "")).split(":")[0], order)
            ax.plot([r["T"]], [top], marker="x", color=color, markersize=9, clip_on=False)
        ax.plot([], [], "kx", label="out of memory")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (steps)")
    ax.set_ylabel("step peak memory (MiB, tensors above parameters + data)")
    fixed = describe_fixed(data, ["model", "hidden", "layers", "B", "dtype", "device"], extra)
    ax.set_title(f"(a) Peak memory of one gradient step vs T\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, directory, name, meta, written)


def plot_time_vs_block(records, meta, directory, written, skipped, order):
    name = "time_vs_block"
    data = ok(for_figure(records, name))
    with_k = [r for r in data if r.get("K") is not None]
    if len({r["K"] for r in with_k}) < 2:
        return skip(name, "fewer than two block lengths measured", skipped)
    extra = varying(data, ["model", "hidden", "layers", "B", "T"])
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    series = defaultdict(list)
    for r in with_k:
        series[(r["method_name"], label_of({**r, "method_description": r["method_name"]}, extra))].append(r)
    memory_ax = ax.twinx()  # the other side of the trade: K steps of activations
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["K"])
        color, marker = method_style(method, order)
        ks = [r["K"] for r in rs]
        med = [r["time_s"]["median"] for r in rs]
        lo = [r["time_s"]["median"] - r["time_s"].get("q1", r["time_s"]["median"]) for r in rs]
        hi = [r["time_s"].get("q3", r["time_s"]["median"]) - r["time_s"]["median"] for r in rs]
        ax.errorbar(ks, med, yerr=[lo, hi], marker=marker, color=color, capsize=3,
                    label=f"{label}: time (bars: quartiles)")
        memory_ax.plot(ks, [r["memory"]["step_peak_bytes"] / MIB for r in rs], marker=marker,
                       color=color, linestyle=":", alpha=0.5, markerfacecolor="none",
                       label=f"{label}: step peak memory")
    for r in data:
        if r.get("K") is None:
            color, _ = method_style(r["method_name"], order)
            ax.axhline(r["time_s"]["median"], color=color, linestyle="--", linewidth=1,
                       label=f"{label_of(r, extra)}: time (no K)")
    memory_ax.set_yscale("log")
    memory_ax.set_ylabel("step peak memory (MiB, dotted)", color="0.4")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = memory_ax.get_legend_handles_labels()
    ax.legend(handles + more_handles, labels + more_labels, fontsize=7, loc="best")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block length K (steps)")
    ax.set_ylabel("time per gradient step (s, median)")
    fixed = describe_fixed(data, ["model", "hidden", "layers", "B", "T", "dtype", "device"], extra)
    ax.set_title(f"(b) Time of one gradient step vs block length K\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, directory, name, meta, written)


def plot_memory_vs_utilization(records, meta, directory, written, skipped, order):
    name = "memory_vs_utilization"
    data = [r for r in ok(for_figure(records, name)) if r.get("utilization") is not None]
    extra = varying(data, ["model", "hidden", "layers", "T"])
    series = defaultdict(list)
    for r in data:
        series[(r["method_name"], label_of(r, extra))].append(r)
    if not any(len({r["B"] for r in rs}) > 1 for rs in series.values()):
        return skip(name, "no method was measured at more than one batch size", skipped)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["B"])
        color, marker = method_style(method, order)
        mib = [r["memory"]["step_peak_bytes"] / MIB for r in rs]
        util = [100.0 * r["utilization"] for r in rs]
        ax.plot(mib, util, marker=marker, color=color, label=label)
        for x, y, r in zip(mib, util, rs):
            ax.annotate(f"B={r['B']}", (x, y), textcoords="offset points", xytext=(4, -10),
                        fontsize=7, color=color)
    ax.set_xscale("log")
    ax.set_xlabel("step peak memory (MiB, tensors above parameters + data)")
    ax.set_ylabel("utilization (% of the measured peak GEMM rate)")
    fixed = describe_fixed(data, ["model", "hidden", "layers", "T", "dtype", "device"], extra)
    ax.set_title(f"(c) Memory vs utilization over batch sizes\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, directory, name, meta, written)


def plot_max_batch(records, meta, directory, written, skipped, order):
    name = "max_batch"
    tagged = [r for r in for_figure(records, name) if r.get("kind") == "max_batch"]
    if not tagged:
        return skip(name, "no max_batch records", skipped)
    data = sorted(tagged, key=lambda r: order_key(r.get("method_name", r["method"].split(":")[0]), order))
    labels = [r.get("method_description") or r["method"] for r in data]
    colors = [method_style(r.get("method_name", r["method"].split(":")[0]), order)[0] for r in data]
    batches = [r.get("max_batch", 0) for r in data]
    seqs = [r.get("sequences_per_s", 0.0) if r.get("status") == "ok" else 0.0 for r in data]
    budget = data[0].get("budget_bytes", 0) / MIB
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.6, 4.4))
    bars = left.bar(labels, batches, color=colors)
    for bar, b in zip(bars, batches):
        left.annotate(f"{b}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                      ha="center", va="bottom", fontsize=8)
    left.set_ylabel("largest batch B that fits (sequences)")
    left.set_title(f"max batch in {budget:.0f} MiB", fontsize=10)
    bars = right.bar(labels, seqs, color=colors)
    for bar, r in zip(bars, data):
        util = r.get("utilization")
        text = f"{100 * util:.0f}% util." if util is not None else r.get("status", "")
        right.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                       ha="center", va="bottom", fontsize=8)
    right.set_ylabel("throughput at that batch (sequences / s)")
    right.set_title("throughput at the max batch", fontsize=10)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8, rotation=15)
        ax.grid(True, axis="y", alpha=0.3)
    fixed = describe_fixed(data, ["model", "hidden", "layers", "T", "dtype", "device"], [])
    fig.suptitle(f"(d) Same memory budget ({budget:.0f} MiB: parameters + data + step peak), "
                 f"per method\n{fixed}", fontsize=10)
    save(fig, directory, name, meta, written)


def plot_tbptt_error(records, meta, directory, written, skipped, order):
    name = "tbptt_error"
    data = [r for r in ok(for_figure(records, name)) if "error_vs_full" in r]
    data = [r for r in data if not r.get("exact", True)] or data
    with_k = [r for r in data if r.get("K") is not None]
    if len({r["K"] for r in with_k}) < 2:
        return skip(name, "no approximate method measured at two or more window lengths k "
                          "with gradient_error", skipped)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    series = defaultdict(list)
    for r in with_k:
        series[r["method_name"]].append(r)
    exact_at = []  # windows where the error is zero (k >= T: no truncation at all)
    for method, rs in sorted(series.items(), key=lambda kv: order_key(kv[0], order)):
        rs.sort(key=lambda r: r["K"])
        color, marker = method_style(method, order)
        # A log axis cannot show a zero error: those windows are named in a note instead.
        nonzero = [r for r in rs if (r["error_vs_full"]["grad_rel_error"] or 0.0) > 1e-12]
        exact_at += [r["K"] for r in rs if r not in nonzero]
        ks = [r["K"] for r in nonzero]
        ax.plot(ks, [r["error_vs_full"]["grad_rel_error"] for r in nonzero], marker=marker,
                color=color, label=f"{method}: ||g - g_full|| / ||g_full||")
        ax.plot(ks, [max(1.0 - (r["error_vs_full"]["grad_cosine"] or 0.0), 1e-16) for r in nonzero],
                marker=marker, color=color, linestyle=":", label=f"{method}: 1 - cosine(g, g_full)")
    if exact_at:
        ax.text(0.02, 0.03, "error 0 (exact) at k = " + ", ".join(str(k) for k in sorted(set(exact_at))),
                transform=ax.transAxes, ha="left", va="bottom", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("truncation window k (steps)")
    ax.set_ylabel("parameter-gradient error vs full BPTT (relative)")
    fixed = describe_fixed(data, ["model", "hidden", "layers", "B", "T", "dtype", "device"], [])
    ax.set_title(f"(e) Truncated BPTT's gradient error vs k\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    save(fig, directory, name, meta, written)


def plot_verify_max_rel(records, meta, directory, written, skipped, order):
    name = "verify_max_rel"
    data = [r for r in records if r.get("kind") == "verify" and r.get("exact", True)
            and not r.get("error")]
    if not data:
        return skip(name, "no records of `vlrnn verify --out`", skipped)
    methods = sorted({r["method"].split(":")[0] for r in data}, key=lambda m: order_key(m, order))
    dtypes = sorted({r["dtype"] for r in data})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.2 * len(dtypes), 4.4), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        rows = [r for r in data if r["dtype"] == dtype]
        tolerance = rows[0]["tolerance"]
        floor = 1e-18  # exact zeros drawn at the floor
        for i, m in enumerate(methods):
            values = [max(r["max_rel_diff"], floor) for r in rows if r["method"].split(":")[0] == m]
            if not values:
                continue
            logs = [math.log10(v) for v in values]
            ax.scatter([i + 0.25 * ((k * 0.618) % 1.0 - 0.5) for k in range(len(logs))], logs,
                       s=4, alpha=0.35, color=method_style(m, order)[0])
            ax.plot([i - 0.3, i + 0.3], [max(logs)] * 2, color="black", lw=1)
            failed = sum(1 for r in rows if r["method"].split(":")[0] == m and not r["passed"])
            ax.annotate(f"n={len(values)}, failed {failed}", (i, math.log10(floor) + 0.5),
                        ha="center", fontsize=7)
        ax.axhline(math.log10(tolerance), color="tab:red", ls="--", lw=1,
                   label=f"tolerance {tolerance:g}")
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels(methods)
        ax.set_ylabel("log10 max relative difference to full BPTT")
        ax.set_title(f"{dtype}: every exact case (bar: the worst; exact zeros at -18)",
                     fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_ylim(math.log10(floor) - 0.5, math.log10(tolerance) + 1)
        ax.legend(fontsize=8, loc="center right")
    save(fig, directory, name, meta, written)


def describe_fixed(records, keys, varying_keys):
    parts = []
    for k in keys:
        if k in varying_keys:
            continue
        values = {json.dumps(r.get(k)) for r in records}
        if len(values) == 1:
            v = records[0].get(k)
            parts.append(f"{k}={v}" if k not in ("dtype", "device", "model") else str(v))
    return ", ".join(parts)


def order_key(method, order):
    return (order.index(method) if method in order else len(order), method)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    directory = argv[1]
    records, meta = load(directory)
    order = meta.get("methods_in_registry", ["full", "vlrnn", "checkpoint", "tbptt"])
    written, skipped = [], []
    for plot in (plot_memory_vs_t, plot_time_vs_block, plot_memory_vs_utilization,
                 plot_max_batch, plot_tbptt_error, plot_verify_max_rel):
        plot(records, meta, directory, written, skipped, order)
    out = os.path.join(directory, "figures")
    for name in written:
        print(f"plot.py: wrote {out}/{name}.png and .pdf")
    for note in skipped:
        print(f"plot.py: skipped {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
