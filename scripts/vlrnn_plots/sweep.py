"""Figures of a `vlrnn sweep` (or `vlrnn merge`) folder: records of kind "grid" and "max_batch".

  memory_vs_T            (a) iteration peak memory vs sequence length T per method, log-log
  time_vs_block          (b) time per iteration vs block length K (bars: spread of the
                             repeats), and each method's paired time ratio to full BPTT with
                             its 95 % interval (hollow: noisy)
  memory_vs_utilization  (c) iteration peak memory vs utilization, one curve per method,
                             points labelled by batch size (bars: from the time's spread)
  max_batch              (d) largest batch and throughput under one memory budget, bars
  tbptt_error            (e) truncated BPTT's gradient error vs full BPTT, per window k

Each figure takes the records whose experiment lists it in "figures" (see
experiments/configs/quick.json); a figure without such records, or without the data it needs,
is skipped with a note, never an error.
"""
from collections import defaultdict

from . import common, stats
from .common import (MIB, describe_fixed, legend, method_style, noisy_legend_handle, order_key,
                     plot_ratio_points, plt, save, spread_name, time_samples, time_summary,
                     varying, yerr)

# A method's curves, first to last, when it has several (other K, other model): the colour
# and marker say the method, the dashes which of its curves.
LINESTYLES = ["-", "--", ":", "-."]


def accepts(record):
    return record.get("kind") in ("grid", "max_batch") or "figures" in record


def for_figure(records, figure):
    return [r for r in records if figure in (r.get("figures") or [])]


def ok(records):
    return [r for r in records if r.get("status") == "ok"]


def label_of(record, extra_keys):
    label = record["method_description"]
    extras = [f"{k}={record.get(k)}" for k in extra_keys]
    return label + (" " + " ".join(extras) if extras else "")


def curves(records, extra_keys):
    """{(method name, label): records}: one curve per method as the config gave it, and per
    value of each of extra_keys (named in the label).

    A method given its block length (NOTE [ Which methods get K ] in
    experiments/lib/sweep_config.h) runs a spec that can change with T (checkpoint's
    segments = T / K): its name and K make the curve. Any other method runs the same spec at
    every point, so the spec makes the curve; not its display name, which may change with T
    (a planner's percentage raised to the least it can honour at one T says so, and grouped
    by that name it was two legend entries, a stray point and a line). The label is the
    display name when every point shares it, else the name and K, or the spec."""
    groups = defaultdict(list)
    for r in records:
        given = ("K", r["K"]) if r.get("K") is not None else ("spec", r["method"])
        groups[(r["method_name"], given, tuple(str(r.get(k)) for k in extra_keys))].append(r)
    out = {}
    for (method, (kind, value), _), rs in groups.items():
        shown = {r.get("method_description") or r["method"] for r in rs}
        label = shown.pop() if len(shown) == 1 else \
            f"{method} (K={value})" if kind == "K" else value
        extras = " ".join(f"{k}={rs[0].get(k)}" for k in extra_keys)
        out[(method, label + (" " + extras if extras else ""))] = rs
    return out


def ratio_to_full(record, by_key):
    """{value, ci, noisy, computed} of a record's paired time ratio to full BPTT, or None.
    The interval is the record's own (`paired_time_ratio_ci`) when it has one; records of
    sweeps that did not write it get one here: a bootstrap over the paired rounds of its
    samples and full's (the methods took turns within each round, so sample i of each belongs
    to round i)."""
    value = record.get("paired_time_ratio_to_full")
    if value is None or value != value:  # absent or NaN
        return None
    ci = record.get("paired_time_ratio_ci")
    computed = False
    if not ci and record["method"] != "full":
        full = by_key.get(record["key"].replace(f"|{record['method']}|", "|full|", 1))
        if full:
            ci = stats.paired_ratio_ci(time_samples(record), time_samples(full))
            computed = ci is not None
    noisy = record.get("time_ratio_noisy")
    if noisy is None:
        noisy = stats.is_noisy(value, ci) if record["method"] != "full" else False
    return {"value": value, "ci": ci, "noisy": noisy, "computed": computed}


def plot_memory_vs_t(name, records, meta, directory, written, skipped, order):
    tagged = for_figure(records, name)
    data = ok(tagged)
    if not data:
        return skipped.append(f"{name} (no records for it)")
    extra = varying(data, ["model", "H", "layers", "B"])
    series = curves(data, extra)
    if not any(len({r["T"] for r in rs}) > 1 for rs in series.values()):
        return skipped.append(f"{name} (no method was measured at more than one T)")
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    drawn = defaultdict(int)  # curves drawn so far per method
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["T"])
        color, marker = method_style(method, order)
        dashes = LINESTYLES[drawn[method] % len(LINESTYLES)]
        drawn[method] += 1
        ax.plot([r["T"] for r in rs], [common.peak_bytes(r["memory"]) / MIB for r in rs],
                marker=marker, color=color, linestyle=dashes, label=label)
    # Points that ran out of memory: an x at the top of the axis, at their T.
    failed = [r for r in tagged if r.get("status") == "oom"]
    if failed:
        top = ax.get_ylim()[1]
        for r in failed:
            color, _ = method_style(r["method"].split(":")[0], order)
            ax.plot([r["T"]], [top], marker="x", color=color, markersize=9, clip_on=False)
        ax.plot([], [], "kx", label="out of memory")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (steps)")
    ax.set_ylabel("iteration peak memory (MiB, tensors above parameters + data)")
    fixed = describe_fixed(data, ["model", "H", "layers", "B", "dtype", "device"], extra)
    ax.set_title(f"(a) Peak memory of one iteration vs T\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    legend(ax, fontsize=8)
    save(fig, directory, name, meta, written,
         "Exact bytes of live tensors during one iteration (a tracking allocator); no time is drawn.")


def plot_time_vs_block(name, records, meta, directory, written, skipped, order):
    data = ok(for_figure(records, name))
    with_k = [r for r in data if r.get("K") is not None]
    if len({r["K"] for r in with_k}) < 2:
        return skipped.append(f"{name} (fewer than two block lengths measured)")
    by_key = {r.get("key"): r for r in records}
    extra = varying(data, ["model", "H", "layers", "B", "T"])
    fig, (ax, rax) = plt.subplots(1, 2, figsize=(11.5, 4.9))
    series = defaultdict(list)
    for r in with_k:
        series[(r["method_name"], label_of({**r, "method_description": r["method_name"]}, extra))].append(r)
    memory_ax = ax.twinx()  # the other side of the trade: K steps of activations
    computed_ci = False
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["K"])
        color, marker = method_style(method, order)
        ks = [r["K"] for r in rs]
        times = [time_summary(r) for r in rs]
        med = [t["median"] for t in times]
        lows, highs = zip(*[stats.spread(t)[:2] for t in times])
        ax.errorbar(ks, med, yerr=yerr(med, lows, highs), marker=marker, color=color, capsize=3,
                    label=f"{label}: time")
        memory_ax.plot(ks, [common.peak_bytes(r["memory"]) / MIB for r in rs], marker=marker,
                       color=color, linestyle=":", alpha=0.5, markerfacecolor="none",
                       label=f"{label}: iteration peak memory")
        ratios = [(r["K"], ratio_to_full(r, by_key)) for r in rs]
        ratios = [(k, q) for k, q in ratios if q]
        computed_ci |= any(q["computed"] for _, q in ratios)
        plot_ratio_points(rax, [k for k, _ in ratios], [q for _, q in ratios], color, marker, label)
    all_times = [time_summary(r) for r in data]
    for r in data:
        if r.get("K") is None:
            color, _ = method_style(r["method_name"], order)
            t = time_summary(r)
            lo, hi, _ = stats.spread(t)
            ax.axhline(t["median"], color=color, linestyle="--", linewidth=1,
                       label=f"{label_of(r, extra)}: time (no K; band: spread)")
            ax.axhspan(lo, hi, color=color, alpha=0.12, lw=0)
    memory_ax.set_yscale("log")
    memory_ax.set_ylabel("iteration peak memory (MiB, dotted)", color="0.4")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = memory_ax.get_legend_handles_labels()
    legend(ax, handles + more_handles, labels + more_labels, fontsize=6.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block length K (steps)")
    ax.set_ylabel("time per iteration (s, median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"time ({spread_name(all_times)})", fontsize=9)
    rax.axhline(1.0, color="black", lw=0.8, ls="--", label="full BPTT")
    rax.set_xscale("log", base=2)
    rax.set_xlabel("block length K (steps)")
    rax.set_ylabel("time / full BPTT's (median of paired rounds)")
    rax.grid(True, which="both", alpha=0.3)
    rax.set_title("paired time ratio to full BPTT (bars: 95 % bootstrap CI)", fontsize=9)
    handles, labels = rax.get_legend_handles_labels()
    legend(rax, handles + [noisy_legend_handle()], labels + [noisy_legend_handle().get_label()],
           fontsize=7)
    fixed = describe_fixed(data, ["model", "H", "layers", "B", "T", "dtype", "device"], extra)
    fig.suptitle(f"(b) Time of one iteration vs block length K\n{fixed}", fontsize=10)
    note = ("Methods take turns within each repeat. Ratio: median over rounds of time / full's "
            "time in the same round; CI: 95 % bootstrap over the rounds"
            + (" (computed by plot.py from the recorded samples)" if computed_ci else "")
            + f"; hollow: interval wider than ±{stats.NOISY_HALF_WIDTH:.0%} or none (one round).")
    save(fig, directory, name, meta, written, note)


def inverse_spread(value, summary):
    """Low and high of a rate (value ∝ 1 / time) from the time's spread."""
    if not summary or not summary.get("median"):
        return value, value
    lo, hi, _ = stats.spread(summary)
    return value * summary["median"] / hi, value * summary["median"] / lo


def plot_memory_vs_utilization(name, records, meta, directory, written, skipped, order):
    data = [r for r in ok(for_figure(records, name)) if r.get("utilization") is not None]
    extra = varying(data, ["model", "H", "layers", "T"])
    series = curves(data, extra)
    if not any(len({r["B"] for r in rs}) > 1 for rs in series.values()):
        return skipped.append(f"{name} (no method was measured at more than one batch size)")
    fig, ax = plt.subplots(figsize=(6.4, 4.9))
    for (method, label), rs in sorted(series.items(), key=lambda kv: order_key(kv[0][0], order)):
        rs.sort(key=lambda r: r["B"])
        color, marker = method_style(method, order)
        mib = [common.peak_bytes(r["memory"]) / MIB for r in rs]
        util = [100.0 * r["utilization"] for r in rs]
        lows, highs = zip(*[inverse_spread(u, time_summary(r)) for u, r in zip(util, rs)])
        ax.errorbar(mib, util, yerr=yerr(util, lows, highs), marker=marker, color=color,
                    capsize=3, label=label)
        for x, y, r in zip(mib, util, rs):
            ax.annotate(f"B={r['B']}", (x, y), textcoords="offset points", xytext=(4, -10),
                        fontsize=7, color=color)
    ax.set_xscale("log")
    ax.set_xlabel("iteration peak memory (MiB, tensors above parameters + data)")
    ax.set_ylabel("utilization (% of the measured peak GEMM rate)")
    fixed = describe_fixed(data, ["model", "H", "layers", "T", "dtype", "device"], extra)
    ax.set_title(f"(c) Memory vs utilization over batch sizes\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    legend(ax, fontsize=8)
    save(fig, directory, name, meta, written,
         f"Utilization: useful FLOPs / median time / peak GEMM rate; "
         f"{spread_name([time_summary(r) for r in data])} of the time.")


def plot_max_batch(name, records, meta, directory, written, skipped, order):
    tagged = [r for r in for_figure(records, name) if r.get("kind") == "max_batch"]
    if not tagged:
        return skipped.append(f"{name} (no max_batch records)")
    method_of = lambda r: r.get("method_name", r["method"].split(":")[0])  # noqa: E731
    data = sorted(tagged, key=lambda r: order_key(method_of(r), order))
    labels = [r.get("method_description") or r["method"] for r in data]
    colors = [method_style(method_of(r), order)[0] for r in data]
    batches = [r.get("max_batch", 0) for r in data]
    seqs = [r.get("sequences_per_s", 0.0) if r.get("status") == "ok" else 0.0 for r in data]
    lows, highs = zip(*[inverse_spread(s, time_summary(r)) if s else (0.0, 0.0)
                        for s, r in zip(seqs, data)])
    budget = data[0].get("budget_bytes", 0) / MIB
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.6, 4.6))
    bars = left.bar(labels, batches, color=colors)
    for bar, b in zip(bars, batches):
        left.annotate(f"{b}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                      ha="center", va="bottom", fontsize=8)
    left.set_ylabel("largest batch B that fits (sequences)")
    left.set_title(f"max batch in {budget:.0f} MiB", fontsize=10)
    bars = right.bar(labels, seqs, color=colors, yerr=yerr(seqs, lows, highs), capsize=4,
                     ecolor="0.2")
    for bar, r, hi in zip(bars, data, highs):
        util = r.get("utilization")
        text = f"{100 * util:.0f}% util." if util is not None else r.get("status", "")
        right.annotate(text, (bar.get_x() + bar.get_width() / 2, hi),
                       ha="center", va="bottom", fontsize=8)
    right.set_ylabel("throughput at that batch (sequences / s)")
    right.set_title(f"throughput at the max batch\n({spread_name([time_summary(r) for r in data])})",
                    fontsize=9)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8, rotation=15)
        ax.grid(True, axis="y", alpha=0.3)
    fixed = describe_fixed(data, ["model", "H", "layers", "T", "dtype", "device"], [])
    fig.suptitle(f"(d) Same memory budget ({budget:.0f} MiB: parameters + data + iteration peak), "
                 f"per method\n{fixed}", fontsize=10)
    save(fig, directory, name, meta, written)


def plot_tbptt_error(name, records, meta, directory, written, skipped, order):
    data = [r for r in ok(for_figure(records, name)) if "error_vs_full" in r]
    data = [r for r in data if not r.get("exact", True)] or data
    with_k = [r for r in data if r.get("K") is not None]
    if len({r["K"] for r in with_k}) < 2:
        return skipped.append(f"{name} (no approximate method measured at two or more window "
                              f"lengths k with gradient_error)")
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
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
    fixed = describe_fixed(data, ["model", "H", "layers", "B", "T", "dtype", "device"], [])
    ax.set_title(f"(e) Truncated BPTT's gradient error vs k\n{fixed}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    legend(ax, fontsize=8, loc="upper right")
    save(fig, directory, name, meta, written,
         "Deterministic: the same seed gives the same error; no time is drawn.")


# The figures a sweep config's "figures" may name, by name: the same list, in the same order,
# as kFigures in experiments/lib/sweep_config.cpp (ctest plot.figure_lists checks it).
FIGURES = {"memory_vs_T": plot_memory_vs_t, "time_vs_block": plot_time_vs_block,
           "memory_vs_utilization": plot_memory_vs_utilization, "max_batch": plot_max_batch,
           "tbptt_error": plot_tbptt_error}


def draw(records, meta, directory, written, skipped):
    order = meta.get("methods_in_registry", ["full", "vlrnn", "checkpoint", "tbptt"])
    for name, figure in FIGURES.items():
        figure(name, records, meta, directory, written, skipped, order)
