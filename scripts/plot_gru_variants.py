#!/usr/bin/env python3
"""Figures from a GRU-variant benchmark folder (scripts/bench_gru_variants.sh).

    python3 scripts/plot_gru_variants.py results/cpu-gru-variants [--time real|cpu]

--time cpu uses the main thread's CPU time instead of wall-clock time: with one BLAS thread
(OPENBLAS_NUM_THREADS=1) that is all the work, and it barely moves when other processes share
the cores.

Reads bench_gru_variants.json (Google Benchmark, 3 repetitions per point) and meta.json, and
writes into DIR/figures/ (PNG + PDF):
  relative_speed_b{B}   speed of each implementation relative to GRU v1 (time_v1 / time),
                        one group of bars per hidden size, at minibatch B (128 is Baidu's
                        figure); one figure per minibatch present
  gflops                achieved GFLOP/s (useful FLOPs / median time) against minibatch, one
                        panel per hidden size
  memory                resident memory grown by the forward (held for backward) and peak
                        during forward + backward, per implementation, at each hidden size's
                        largest minibatch
  summary.csv           the medians, one row per implementation, hidden size and minibatch
Every figure's caption names the command that measured it.
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys

import bench_json
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Benchmark name -> label, in plotting order.
IMPLEMENTATIONS = [
    ("BlockGru/v1", "GRU v1 (reset before W_hn)"),
    ("BlockGru/v2", "GRU v2 (+ grouped GEMMs)"),
    ("BlockGru/v3", "GRU v3 (reset after W_hn)"),
    ("BlockGru/v4", "GRU v4 (save at GEMMs)"),
    ("TorchGru", "LibTorch nn::GRU"),
    ("TorchGruCellLoop", "LibTorch GRUCell loop"),
]
NAME = re.compile(r"^BM_(?P<impl>[A-Za-z]+(?:/v\d)?)/H:(?P<H>\d+)/B:(?P<B>\d+)")


def load(folder, clock):
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    # Median of the repetitions ourselves: works whether or not aggregates were reported.
    times, flops, memory = {}, {}, {}
    path = os.path.join(folder, meta.get("benchmark_json", "bench_gru_variants.json"))
    for m, seconds, b in bench_json.iterations(path, NAME, clock):
        key = (m["impl"], int(m["H"]), int(m["B"]))
        times.setdefault(key, []).append(seconds)
        flops[key] = b["GFLOP"] * 1e9
        if "held_MB" in b:
            memory.setdefault(key, []).append((b["held_MB"], b["peak_MB"]))
    medians = {k: statistics.median(v) for k, v in times.items()}
    # Resident-memory growth, the least over the repetitions: memory the allocator kept
    # resident after a free only ever adds to a reading, so the least is the closest to what
    # the tensors themselves needed.
    memory = {k: (f"{min(m[0] for m in v):.0f}", f"{min(m[1] for m in v):.0f}") for k, v in memory.items()}
    return meta, medians, flops, {k: len(v) for k, v in times.items()}, memory


CLOCK = {"real": "wall-clock time", "cpu": "main-thread CPU time"}


def caption(fig, meta, extra=""):
    env = " ".join(f"{k}={v}" for k, v in sorted(meta.get("env", {}).items()))
    text = (f"Command: {env + ' ' if env else ''}{meta['command']}\n"
            f"LibTorch {meta.get('libtorch', '?')}, BLAS {os.path.basename(os.path.dirname(meta.get('blas', '?')))}"
            f", {meta.get('nproc', '?')} cores ({meta.get('cpu', '?')}), float32, T = {meta.get('steps', 256)}, "
            f"git {meta.get('git_sha', '?')[:10]}, load average before / after "
            f"{meta.get('loadavg_before', '?')} / {meta.get('loadavg_after', '?')} (shared machine). {extra}")
    fig.text(0.01, 0.01, text, fontsize=6.5, va="bottom", ha="left", wrap=True)


def save(fig, folder, name):
    for ext in ("png", "pdf"):
        fig.savefig(os.path.join(folder, "figures", f"{name}.{ext}"), dpi=150)
    plt.close(fig)


def plot_relative(folder, meta, medians, batch, clock):
    hiddens = sorted({h for (impl, h, b) in medians if b == batch and (("BlockGru/v1", h, b) in medians)})
    if not hiddens:
        return
    fig, ax = plt.subplots(figsize=(8, 4.6))
    width = 0.8 / len(IMPLEMENTATIONS)
    for i, (impl, label) in enumerate(IMPLEMENTATIONS):
        xs, ys = [], []
        for j, h in enumerate(hiddens):
            if (impl, h, batch) in medians:
                xs.append(j + (i - (len(IMPLEMENTATIONS) - 1) / 2) * width)
                ys.append(medians[("BlockGru/v1", h, batch)] / medians[(impl, h, batch)])
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(hiddens)))
    ax.set_xticklabels([f"H = {h}" for h in hiddens])
    ax.set_xlabel("hidden size (input size F = H)")
    ax.set_ylabel("speed relative to GRU v1 (time v1 / time)")
    ax.set_title(f"GRU forward + backward of one block, minibatch {batch}")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend above the bars
    ax.legend(fontsize=7, ncol=3, loc="upper center")
    fig.subplots_adjust(bottom=0.25)
    caption(fig, meta, f"Bars: median {CLOCK[clock]} of the repetitions, measured side by side "
                       "in one run.")
    save(fig, folder, f"relative_speed_b{batch}")


def plot_gflops(folder, meta, medians, flops, clock):
    hiddens = sorted({h for (_, h, _) in medians})
    fig, axes = plt.subplots(1, len(hiddens), figsize=(4 * len(hiddens), 4.2), squeeze=False)
    for ax, h in zip(axes[0], hiddens):
        for impl, label in IMPLEMENTATIONS:
            pts = sorted((b, flops[k] / medians[k] / 1e9) for k in medians
                         if k[0] == impl and k[1] == h for b in [k[2]])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("minibatch B")
        ax.set_ylabel("achieved GFLOP/s (useful FLOPs)")
        ax.set_title(f"H = {h}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.subplots_adjust(bottom=0.3, wspace=0.3)
    caption(fig, meta, f"FLOPs: forward 2·B·(F·3H + H·3H) per step, backward 2x forward; "
                       f"median {CLOCK[clock]}.")
    save(fig, folder, "gflops")


def plot_memory(folder, meta, memory):
    hiddens = sorted({h for (_, h, _) in memory})
    if not hiddens:
        return
    fig, axes = plt.subplots(1, len(hiddens), figsize=(4 * len(hiddens), 4.4), squeeze=False)
    for ax, h in zip(axes[0], hiddens):
        batch = max(b for (_, hh, b) in memory if hh == h)
        labels, held, peak = [], [], []
        for impl, label in IMPLEMENTATIONS:
            if (impl, h, batch) in memory:
                labels.append(label.split(" (")[0])
                held.append(float(memory[(impl, h, batch)][0]))
                peak.append(float(memory[(impl, h, batch)][1]))
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], held, 0.4, label="held after forward")
        ax.bar([x + 0.2 for x in xs], peak, 0.4, label="peak in forward + backward")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("resident memory grown (MB)")
        ax.set_title(f"H = {h}, B = {batch}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.subplots_adjust(bottom=0.38, wspace=0.35)
    caption(fig, meta, "Memory: VmRSS / VmHWM growth over the iteration's start, after malloc_trim; "
                       "least of the repetitions.")
    save(fig, folder, "memory")


def write_summary(folder, medians, flops, counts, memory, clock):
    with open(os.path.join(folder, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["implementation", "H", "B", f"median_{clock}_s", "held_MB", "peak_MB", "repetitions", "gflop_per_s", "speed_vs_v1",
                    "speed_vs_torch_gru"])
        for impl, _ in IMPLEMENTATIONS:
            for key in sorted(k for k in medians if k[0] == impl):
                _, h, b = key
                v1 = medians.get(("BlockGru/v1", h, b))
                torch_gru = medians.get(("TorchGru", h, b))
                held, peak = memory.get(key, ("", ""))
                w.writerow([impl, h, b, f"{medians[key]:.4f}", held, peak, counts[key],
                            f"{flops[key] / medians[key] / 1e9:.1f}",
                            f"{v1 / medians[key]:.3f}" if v1 else "",
                            f"{torch_gru / medians[key]:.3f}" if torch_gru else ""])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--time", choices=["real", "cpu"], default="real")
    args = parser.parse_args()
    folder, clock = args.folder, args.time
    meta, medians, flops, counts, memory = load(folder, clock)
    if not medians:
        sys.exit(f"{folder}: no benchmark points found")
    os.makedirs(os.path.join(folder, "figures"), exist_ok=True)
    for batch in sorted({b for (_, _, b) in medians}):
        plot_relative(folder, meta, medians, batch, clock)
    plot_gflops(folder, meta, medians, flops, clock)
    plot_memory(folder, meta, memory)
    write_summary(folder, medians, flops, counts, memory, clock)
    print(f"{folder}/figures: relative_speed_b*, gflops, memory (.png/.pdf); {folder}/summary.csv")


if __name__ == "__main__":
    main()
