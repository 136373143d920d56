"""Figures of a `vlrnn train CONFIG --out DIR` folder: records of kind "train_step" (one per
optimizer step) and "train_run" (one per finished run). A curve is a method's, or a method's
on a model of its own ("vlrnn:block_length=28 · mingru") when its entry in the config names one.

  loss_vs_step       training loss (mean of 10 steps) and held-out loss against the step, per
                     method: the median over seeds, the band from the best to the worst seed;
                     chance (the task's loss without the long-range information) dashed. Each
                     legend entry names the batch and the median iteration peak memory.
  loss_vs_time       held-out loss against the training clock (steps only; evaluation not
                     counted), median and band over seeds on a common time grid.
  accuracy           when the task classifies sequences (records carry "eval_accuracy", e.g.
                     Fashion-MNIST): held-out accuracy against the step and against the
                     training clock, median and band over seeds, side by side.
  deviation_from_full  when full BPTT and other exact methods ran: per exact method, the largest
                     absolute difference of its training loss from full BPTT's at the same seed
                     and step, up to each step (float rounding, amplified by training).
"""
import math
from collections import defaultdict

import numpy as np

from .common import FALLBACK, MIB, legend, method_style, order_key, plt, save

SMOOTH_STEPS = 10
# Exact methods' curves lie on top of each other: each later one is drawn thinner and dashed
# over the earlier ones, so that every one stays visible where they coincide.
DASHES = [(None, 3.2), ((6, 2), 2.4), ((3, 2), 1.9), ((1, 1.5), 1.6), ((8, 2, 1, 2), 1.3),
          ((2, 3), 1.1), ((4, 4), 1.0)]


def accepts(record):
    return record.get("kind") in ("train_step", "train_run")


def _family(method):
    return method.split(":")[0]


def _styles(methods, order):
    """{method: (colour, dashes, width)}: the shared colour of its family, unless an earlier
    method took that colour (tbptt and revolve share one elsewhere)."""
    out, used = {}, set()
    for i, method in enumerate(sorted(methods, key=lambda m: order_key(_family(m), order))):
        color = method_style(_family(method), order)[0]
        if color in used:
            color = next(c for c in FALLBACK if c not in used)
        used.add(color)
        dashes, width = DASHES[min(i, len(DASHES) - 1)]
        out[method] = (color, dashes, width)
    return out


def _series(record):
    """A curve's name: the method, and the model's kind for a run on a method entry's own
    model (its run label says "|model=KIND|")."""
    if "|model=" in record.get("run", ""):
        return f"{record['method']} · {record['model']}"
    return record["method"]


def _full_of(series):
    """The full-BPTT series an exact method's series is compared with: the same model's."""
    model = series.partition(" · ")[2]
    return f"full · {model}" if model else "full"


def _runs(records):
    """{series: {seed: [step records in step order]}}"""
    runs = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("kind") == "train_step":
            runs[_series(r)][r["seed"]].append(r)
    for seeds in runs.values():
        for steps in seeds.values():
            steps.sort(key=lambda r: r["step"])
    return runs


def _smooth(values, width):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


def _label(method, seeds):
    batches = sorted({r["batch"] for steps in seeds.values() for r in steps})
    peaks = sorted(r["iteration_peak_bytes"] for steps in seeds.values() for r in steps)
    peak = peaks[len(peaks) // 2] / MIB
    batch = "/".join(str(b) for b in batches)
    return f"{method} (B={batch}, {peak:.3g} MiB, {len(seeds)} seed{'s' * (len(seeds) > 1)})"


def _band(ax, xs, series, style, label):
    """Median line and min-max band of equally long series over xs."""
    color, dashes, width = style
    stacked = np.array(series)
    ax.fill_between(xs, stacked.min(axis=0), stacked.max(axis=0), color=color, alpha=0.1, lw=0)
    line, = ax.plot(xs, np.median(stacked, axis=0), color=color, lw=width, label=label)
    if dashes:
        line.set_dashes(dashes)


def _chance(ax, records):
    chances = {r["chance_loss"] for r in records if r.get("kind") == "train_run"}
    if chances:
        ax.axhline(min(chances), color="0.4", ls="--", lw=1, label="chance")


def _common_steps(seeds, key):
    """Steps present (with `key`) in every seed's run."""
    sets = [{r["step"] for r in steps if key in r} for steps in seeds.values()]
    return sorted(set.intersection(*sets)) if sets else []


def _eval_by_step(seeds, key):
    """(steps, one series per seed) of the evaluations' `key` at the steps every seed has."""
    steps = _common_steps(seeds, key)
    series = []
    for run in seeds.values():
        by_step = {r["step"]: r[key] for r in run if key in r}
        series.append([by_step[s] for s in steps])
    return steps, series


def _eval_by_time(ax, seeds, key, style, label, scale=1.0):
    """The evaluations' `key` against the training clock: median and band over seeds on a
    common grid (linear between evaluations), over the time every seed covers."""
    curves = []
    for run in seeds.values():
        points = [(r["clock_s"], scale * r[key]) for r in run if key in r]
        if len(points) >= 2:
            curves.append(points)
    if not curves:
        return
    end = min(c[-1][0] for c in curves)
    start = max(c[0][0] for c in curves)
    grid = np.linspace(start, end, 100)
    series = [np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves]
    _band(ax, grid, series, style, label)


def _draw_loss_vs_step(runs, records, meta, directory, written, order):
    fig, (train_ax, eval_ax) = plt.subplots(1, 2, figsize=(11, 4.4))
    styles = _styles(runs, order)
    for method in sorted(runs, key=lambda m: order_key(_family(m), order)):
        seeds = runs[method]
        style = styles[method]
        steps = _common_steps(seeds, "loss")
        series = []
        for run in seeds.values():
            by_step = {r["step"]: r["loss"] for r in run}
            series.append(_smooth([by_step[s] for s in steps], SMOOTH_STEPS))
        _band(train_ax, steps, series, style, _label(method, seeds))
        evals, series = _eval_by_step(seeds, "eval_loss")
        if evals:
            _band(eval_ax, evals, series, style, method)
    for ax, title in ((train_ax, f"training loss (mean of {SMOOTH_STEPS} steps)"),
                      (eval_ax, "held-out loss")):
        _chance(ax, records)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss per scored step")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    legend(train_ax, fontsize=7)
    fig.suptitle(f"{meta.get('task', '')}", fontsize=10)
    save(fig, directory, "loss_vs_step", meta, written,
         note="Median over seeds; the band spans the best and the worst seed.")


def _draw_loss_vs_time(runs, records, meta, directory, written, order):
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    styles = _styles(runs, order)
    for method in sorted(runs, key=lambda m: order_key(_family(m), order)):
        seeds = runs[method]
        _eval_by_time(ax, seeds, "eval_loss", styles[method], _label(method, seeds))
    _chance(ax, records)
    ax.set_xlabel("training wall clock (s; evaluation not counted)")
    ax.set_ylabel("held-out loss per scored step")
    ax.grid(alpha=0.3)
    legend(ax, fontsize=7)
    ax.set_title(f"{meta.get('task', '')}", fontsize=9)
    save(fig, directory, "loss_vs_time", meta, written,
         note="Median over seeds on a common time grid (linear between evaluations); the band "
              "spans the best and the worst seed.")


def _draw_accuracy(runs, meta, directory, written, order):
    fig, (step_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    styles = _styles(runs, order)
    for method in sorted(runs, key=lambda m: order_key(_family(m), order)):
        seeds = runs[method]
        steps, series = _eval_by_step(seeds, "eval_accuracy")
        if steps:
            _band(step_ax, steps, [[100 * a for a in s] for s in series], styles[method],
                  _label(method, seeds))
        _eval_by_time(time_ax, seeds, "eval_accuracy", styles[method], method, scale=100)
    step_ax.set_xlabel("optimizer step")
    time_ax.set_xlabel("training wall clock (s; evaluation not counted)")
    step_ax.set_ylabel("held-out accuracy (%)")
    for ax in (step_ax, time_ax):
        ax.grid(alpha=0.3)
    legend(step_ax, fontsize=7)
    fig.suptitle(f"{meta.get('task', '')}", fontsize=10)
    save(fig, directory, "accuracy", meta, written,
         note="Median over seeds (against the clock: on a common time grid, linear between "
              "evaluations); the band spans the best and the worst seed.")


def _draw_deviation(runs, meta, directory, written, skipped, order, exact_methods):
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    styles = _styles(runs, order)
    floor = 1e-18
    for method in sorted(exact_methods, key=lambda m: order_key(_family(m), order)):
        worst_by_step = defaultdict(float)
        for seed, run in runs[method].items():
            reference = {r["step"]: r["loss"] for r in runs[_full_of(method)].get(seed, [])}
            for r in run:
                if r["step"] in reference:
                    gap = abs(r["loss"] - reference[r["step"]])
                    worst_by_step[r["step"]] = max(worst_by_step[r["step"]], gap)
        if not worst_by_step:
            continue
        steps = sorted(worst_by_step)
        running, worst = [], 0.0
        for s in steps:
            worst = max(worst, worst_by_step[s])
            running.append(max(worst, floor))
        ax.plot(steps, running, color=styles[method][0], lw=1.4,
                label=f"{method} (max {worst:.1e})")
    if not ax.lines:
        plt.close(fig)
        return skipped.append("deviation_from_full (no exact method shares a seed with full)")
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("largest |loss - full BPTT's loss| so far")
    ax.grid(alpha=0.3, which="both")
    legend(ax, fontsize=7)
    dtype = (meta.get("config") or {}).get("dtype", "float32")
    save(fig, directory, "deviation_from_full", meta, written,
         note=f"Same weights, same batches, {dtype}: an exact method differs from full BPTT only "
              "by the order of floating-point sums, which training then amplifies. The float64 "
              "test (tests/experiments/test_trainer.cpp) holds it under 1e-10 for 200 steps.")


def draw(records, meta, directory, written, skipped):
    order = meta.get("methods_in_registry", ["full", "vlrnn", "checkpoint", "tbptt"])
    runs = _runs(records)
    if not runs:
        return skipped.append("train figures (no train_step records)")
    _draw_loss_vs_step(runs, records, meta, directory, written, order)
    _draw_loss_vs_time(runs, records, meta, directory, written, order)
    if any("eval_accuracy" in r for r in records):
        _draw_accuracy(runs, meta, directory, written, order)
    exact = {_series(r) for r in records
             if r.get("kind") == "train_run" and r.get("exact") and r["method"] != "full"
             and _full_of(_series(r)) in runs}
    if exact:
        _draw_deviation(runs, meta, directory, written, skipped, order, exact)
    return None
