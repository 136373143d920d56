"""Figures of a Python-peer folder: records of kind "python_peer", written by
scripts/bench_python.py (the Python package against PyTorch, torch.utils.checkpoint and the
original Python VLRNN's algorithm, measured side by side in one process).

  python_peers   one row per experiment: time per iteration (median; bars: the spread of
                 the repeats) and iteration peak memory (exact bytes of live tensors above
                 what was live before the iteration; log scale) per peer, each bar labelled
                 with its paired time ratio to the experiment's reference (95 % interval;
                 '*' where wider than +-10 %, noisy) and its memory ratio
"""
from . import stats
from .common import MIB, plt, save, spread_name, yerr


def accepts(record):
    return record.get("kind") == "python_peer"


def experiments(records):
    seen = {}
    for r in records:
        seen.setdefault(r["experiment"], []).append(r)
    return [(name, sorted(rs, key=lambda r: r.get("order", 0))) for name, rs in seen.items()]


def shape_words(r):
    keys = [k for k in ("T", "B", "F", "H", "blocks", "K") if k in r]
    return ", ".join(f"{k}={r[k]}" for k in keys)


def draw(records, meta, directory, written, skipped):
    groups = experiments(records)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12.0, 3.3 * len(groups) + 0.6),
                             squeeze=False)
    summaries = []
    for row, (name, rs) in enumerate(groups):
        labels = [r["peer"] for r in rs]
        ys = range(len(rs))
        summary = [stats.summarize(r["time_s"]["samples_s"]) for r in rs]
        summaries += summary
        lows, highs, _ = zip(*(stats.spread(s) for s in summary))
        medians = [s["median"] for s in summary]
        reference = next(r for r in rs if r["peer"] == r["reference"])
        ax = axes[row][0]
        ax.barh(ys, medians, xerr=yerr(medians, lows, highs), color="tab:blue", alpha=0.75,
                capsize=3)
        for y, r, high in zip(ys, rs, highs):
            ci = r.get("paired_time_ratio_ci")
            text = f" x{r['paired_time_ratio']:.2f}"
            if ci:
                text += f" [{ci[0]:.2f}, {ci[1]:.2f}]" + ("*" if r.get("time_ratio_noisy") else "")
            ax.text(high, y, text, va="center", fontsize=7)
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(highs) * 1.7)
        ax.set_xlabel("seconds per iteration (forward + backward)")
        ax.set_title(f"{name}: {shape_words(reference)}; time ratio to {reference['peer']}",
                     fontsize=9)
        ax = axes[row][1]
        # A peer that allocates nothing during the iteration (gemm_floor writes into
        # preallocated outputs) has no memory to compare: no bar, a word instead.
        measured = [r["peak_bytes"] / MIB for r in rs if r["peak_bytes"] > 0]
        least = min(measured) / 2
        peaks = [r["peak_bytes"] / MIB if r["peak_bytes"] > 0 else 0.0 for r in rs]
        ax.barh(ys, peaks, color="tab:orange", alpha=0.75)
        ref_peak = max(reference["peak_bytes"], 1)
        for y, r, p in zip(ys, rs, peaks):
            text = (f" {p:.1f} MiB (x{r['peak_bytes'] / ref_peak:.3g})" if p > 0
                    else " no tensors allocated")
            ax.text(max(p, least), y, text, va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(least, max(measured) * 30)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([])
        ax.invert_yaxis()
        ax.set_xlabel("iteration peak memory (MiB, log)")
        ax.set_title(f"{name}: memory ratio to {reference['peer']}", fontsize=9)
    save(fig, directory, "python_peers", meta, written,
         note=f"float32, {meta.get('intra_op_threads', '?')} intra-op thread(s); "
              f"{spread_name(summaries)}; peers take turns within each round")
