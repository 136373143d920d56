"""Figures of a cell-benchmark folder: records of kind "bench", written by
scripts/bench_to_records.py from Google Benchmark's JSON (scripts/bench_gru_variants.sh,
scripts/bench_lstm_block.sh).

  relative_speed_b{B}  speed of each implementation relative to the program's first baseline
                       (its median time / the implementation's), one group of bars per
                       hidden size, at minibatch B; bars: 95 % bootstrap interval of the
                       ratio, hatched and hollow where it is wider than ±10 % (noisy) or
                       there is none (one repetition); one figure per minibatch
  gflops               achieved GFLOP/s (useful FLOPs / median time) against minibatch, one
                       panel per hidden size; bars: from the time's spread
  memory               resident memory grown by the forward (held for backward) and peak
                       during forward + backward, per implementation, at each hidden size's
                       largest minibatch (least of the repetitions)
"""
from matplotlib.patches import Patch

from . import stats
from .common import legend, plt, save, shared_legend, spread_name, yerr

CLOCK = {"real": "wall-clock time", "cpu": "main-thread CPU time"}


def accepts(record):
    return record.get("kind") == "bench"


def implementations(records):
    """[(implementation, label)] in the program's order."""
    seen = {}
    for r in sorted(records, key=lambda r: r.get("order", 0)):
        seen.setdefault(r["implementation"], r.get("label", r["implementation"]))
    return list(seen.items())


def colors(impls):
    return {impl: f"C{i % 10}" for i, (impl, _) in enumerate(impls)}


def clock_words(records):
    return CLOCK.get(records[0].get("clock", "real"), records[0].get("clock", "real"))


def plot_relative(records, meta, directory, written, skipped, batch, suffix):
    name = f"relative_speed_b{batch}{suffix}"
    reference = next((r["baseline_names"][0] for r in records if r.get("baseline_names")), None)
    at_b = [r for r in records if r.get("B") == batch and reference in (r.get("baselines") or {})]
    if not at_b:
        return skipped.append(f"{name} (no point at B = {batch} has the baseline {reference})")
    ref_label = next((r.get("label") for r in records if r["implementation"] == reference), reference)
    hiddens = sorted({r["H"] for r in at_b})
    impls = implementations(records)
    color = colors(impls)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(hiddens) * len(impls) / 2), 5.0))
    width = 0.8 / len(impls)
    any_noisy = False
    for i, (impl, label) in enumerate(impls):
        xs, ys, lows, highs, noisy = [], [], [], [], []
        for j, h in enumerate(hiddens):
            r = next((r for r in at_b if r["implementation"] == impl and r["H"] == h), None)
            if r is None:
                continue
            q = r["baselines"][reference]
            ci = q.get("time_ratio_ci")
            xs.append(j + (i - (len(impls) - 1) / 2) * width)
            ys.append(q["speed"])
            lows.append(1.0 / ci[1] if ci else q["speed"])
            highs.append(1.0 / ci[0] if ci else q["speed"])
            noisy.append(bool(q.get("time_ratio_noisy")) and impl != reference)
        if not xs:
            continue
        bars = ax.bar(xs, ys, width, color=color[impl], edgecolor=color[impl],
                      yerr=yerr(ys, lows, highs), capsize=2, error_kw={"lw": 0.8})
        for bar, n in zip(bars, noisy):
            if n:
                any_noisy = True
                bar.set_facecolor("white")
                bar.set_hatch("////")
        ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=6, padding=1)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(hiddens)))
    ax.set_xticklabels([f"H = {h}" for h in hiddens])
    ax.set_xlabel("hidden size")
    ax.set_ylabel(f"speed relative to {ref_label}\n(its median time / median time)")
    T = at_b[0].get("T")
    ax.set_title(f"Forward + backward of one block (T = {T}), minibatch {batch}", fontsize=10)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend above the bars
    # Legend patches of their own: a bar container's entry takes its first bar's look,
    # hatched when that one is noisy.
    labels = [label for impl, label in impls if any(r["implementation"] == impl for r in at_b)]
    handles = [Patch(facecolor=color[impl]) for impl, _ in impls
               if any(r["implementation"] == impl for r in at_b)]
    if any_noisy:
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="////"))
        labels.append(f"noisy (CI > ±{stats.NOISY_HALF_WIDTH:.0%} or one repetition)")
    legend(ax, handles, labels, fontsize=7, ncol=3, loc="upper center")
    n = sorted({r["repetitions"] for r in at_b})
    save(fig, directory, name, meta, written,
         f"Bars: median {clock_words(records)} of {'/'.join(map(str, n))} repetitions, randomly "
         f"interleaved across implementations in one run; error bars: 95 % bootstrap interval of "
         f"the ratio of medians (unpaired).")


def panels_per_hidden(records, field, height):
    """(records with `field`, H and B; their hidden sizes; implementations; figure; one axis
    per hidden size), or Nones when no record has them."""
    data = [r for r in records if r.get(field) and r.get("H") and r.get("B")]
    if not data:
        return None, None, None, None, None
    hiddens = sorted({r["H"] for r in data})
    fig, axes = plt.subplots(1, len(hiddens), figsize=(4 * len(hiddens), height), squeeze=False)
    return data, hiddens, implementations(data), fig, axes


def plot_gflops(records, meta, directory, written, skipped, suffix):
    name = f"gflops{suffix}"
    data, hiddens, impls, fig, axes = panels_per_hidden(records, "gflop_per_s", 4.4)
    if not data:
        return skipped.append(f"{name} (no records with GFLOP/s, H and B)")
    color = colors(implementations(records))
    for ax, h in zip(axes[0], hiddens):
        for impl, label in impls:
            rs = sorted((r for r in data if r["implementation"] == impl and r["H"] == h),
                        key=lambda r: r["B"])
            if not rs:
                continue
            ys = [r["gflop_per_s"] for r in rs]
            # GFLOP/s = FLOPs / time: the time's low end is the rate's high end.
            spreads = [stats.spread(r["time_s"]) for r in rs]
            lows = [y * r["time_s"]["median"] / s[1] for y, r, s in zip(ys, rs, spreads)]
            highs = [y * r["time_s"]["median"] / s[0] for y, r, s in zip(ys, rs, spreads)]
            ax.errorbar([r["B"] for r in rs], ys, yerr=yerr(ys, lows, highs), marker="o",
                        capsize=3, color=color[impl], label=label)
        peak = next((r.get("peak_gemm_flops_per_s") for r in data if r.get("peak_gemm_flops_per_s")), None)
        if peak:
            ax.axhline(peak / 1e9, color="grey", lw=0.8, ls=":", label="peak GEMM (measured)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("minibatch B")
        ax.set_ylabel("achieved GFLOP/s (useful FLOPs)")
        ax.set_title(f"H = {h}")
        ax.grid(alpha=0.3)
    shared_legend(list(axes[0]), fontsize=7)
    model = next((r.get("flops", {}).get("model") for r in data if r.get("flops", {}).get("model")), "")
    save(fig, directory, name, meta, written,
         f"FLOPs: {model or 'the program counts them'}; median {clock_words(records)}; "
         f"{spread_name([r['time_s'] for r in data])} of the time.")


def plot_memory(records, meta, directory, written, skipped, suffix):
    name = f"memory{suffix}"
    data, hiddens, impls, fig, axes = panels_per_hidden(records, "memory", 4.6)
    if not data:
        return skipped.append(f"{name} (no records with resident memory)")
    for ax, h in zip(axes[0], hiddens):
        batch = max(r["B"] for r in data if r["H"] == h)
        labels, held, peak = [], [], []
        for impl, label in impls:
            r = next((r for r in data if r["implementation"] == impl and r["H"] == h
                      and r["B"] == batch), None)
            if r:
                labels.append(label.split(" (")[0] if label.count("(") == 1 and "lstm_block" not in label else label)
                held.append(r["memory"]["held_MB"])
                peak.append(r["memory"]["peak_MB"])
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], held, 0.4, label="held after forward")
        ax.bar([x + 0.2 for x in xs], peak, 0.4, label="peak in forward + backward")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("resident memory grown (MB)")
        ax.set_title(f"H = {h}, B = {batch}")
        ax.grid(axis="y", alpha=0.3)
    shared_legend(list(axes[0]), fontsize=7)
    save(fig, directory, name, meta, written,
         "Memory: VmRSS / VmHWM growth over the iteration's start, after malloc_trim; least of "
         "the repetitions (memory kept resident after a free only adds to a reading). No time.")


def draw(records, meta, directory, written, skipped):
    programs = sorted({r.get("program", "") for r in records})
    for program in programs:
        mine = [r for r in records if r.get("program", "") == program]
        suffix = f"_{program}" if len(programs) > 1 else ""
        for batch in sorted({r["B"] for r in mine if r.get("B")}):
            plot_relative(mine, meta, directory, written, skipped, batch, suffix)
        plot_gflops(mine, meta, directory, written, skipped, suffix)
        plot_memory(mine, meta, directory, written, skipped, suffix)
