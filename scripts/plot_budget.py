#!/usr/bin/env python3
"""Time overhead over full BPTT against the memory budget, from a `vlrnn budget` result folder.

    python3 scripts/plot_budget.py results/cpu-budget

One panel per sequence length T. x: the memory budget for the step peak (MiB, tensor bytes
above parameters + data; log scale) for the budgeted methods (planner, uniform VLRNN at its
best K under the budget, revolve at its best slot count under the budget; a black x marks a
run whose measured peak exceeded its budget); sqrt(T) checkpointing and full BPTT sit at their
measured peak, revolve's predicted curve (Griewank's minimal recomputation for s slots, priced
by the measured cost model) at its predicted peak. y: time per gradient step / full BPTT's,
measured side by side in one interleaved run. Writes figures/budget.png and .pdf.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MiB = 1024.0 * 1024.0
STYLE = {
    "planner": dict(color="C3", marker="o", label="planner (DP, budget)"),
    "uniform": dict(color="C0", marker="s", label="uniform VLRNN, best K under budget"),
    "revolve": dict(color="C2", marker="^", label="revolve, best slots under budget"),
    "sqrt": dict(color="C1", marker="D", label="sqrt(T) checkpointing"),
    "full": dict(color="k", marker="*", label="full BPTT"),
}


def main(directory):
    records = []
    with open(os.path.join(directory, "results.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    print("plot_budget: skipping a torn line", file=sys.stderr)
    meta = {}
    meta_path = os.path.join(directory, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    steps = sorted({r["T"] for r in records})
    fig, axes = plt.subplots(1, len(steps), figsize=(6.2 * len(steps), 4.8), squeeze=False)
    for ax, T in zip(axes[0], steps):
        theory = sorted((r for r in records if r["T"] == T and r["kind"] == "theory"),
                        key=lambda r: r["predicted"]["peak_bytes"])
        if theory:
            ax.plot([r["predicted"]["peak_bytes"] / MiB for r in theory],
                    [r["predicted_time_ratio"] for r in theory], "--", color="C2", alpha=0.6,
                    label="revolve, predicted (theory)")
        measured = [r for r in records if r["T"] == T and r["kind"] == "measured"
                    and r["run"]["status"] == "ok" and "time_ratio" in r]
        for budget in sorted({r["budget_bytes"] for r in measured}):
            ax.axvline(budget / MiB, color="0.85", lw=0.8, ls=":", zorder=0)
        for method, style in STYLE.items():
            if method in ("sqrt", "full"):
                # One configuration whatever the budget: one point at its measured peak.
                pts = sorted((r["run"]["memory"]["step_peak_bytes"] / MiB, r["time_ratio"])
                             for r in measured if r["method"] == method)
                pts = [(pts[0][0], sorted(p[1] for p in pts)[len(pts) // 2])] if pts else []
            else:
                # Budgeted methods at their budget (each ran within it unless marked "x").
                pts = sorted((r["budget_bytes"] / MiB, r["time_ratio"])
                             for r in measured if r["method"] == method)
                over = [(r["budget_bytes"] / MiB, r["time_ratio"]) for r in measured
                        if r["method"] == method and not r.get("fits_budget", True)]
                if over:
                    ax.plot([p[0] for p in over], [p[1] for p in over], "x", color="k", ms=10)
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts],
                    ls="-" if method not in ("sqrt", "full") else "none", ms=7, **style)
        ax.set_xscale("log")
        ax.set_xlabel("memory budget for the step peak (MiB, log scale)")
        ax.set_ylabel("time per step / full BPTT's (ratio)")
        ax.set_title(f"T = {T}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    problem = meta.get("problem", {})
    caption = ("budgeted methods at their budget (x: measured peak over it); sqrt(T), full: at "
               "their measured peak; revolve theory: at its predicted peak. "
               f"{problem.get('model', '?')} H={problem.get('hidden', '?')} "
               f"B={problem.get('B', '?')} F={problem.get('input', '?')} "
               f"C={problem.get('classes', '?')} {problem.get('dtype', '')}; "
               f"git {str(meta.get('git_sha', '?'))[:10]}; command: {meta.get('command', '?')}")
    fig.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    out = os.path.join(directory, "figures")
    os.makedirs(out, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(os.path.join(out, f"budget.{ext}"), dpi=150)
    print(f"plot_budget: wrote {out}/budget.png and budget.pdf")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: plot_budget.py RESULT_DIR")
    main(sys.argv[1])
