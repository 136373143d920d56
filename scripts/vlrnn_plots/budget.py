"""Figure of a `vlrnn budget` folder: records of kind "measured", "theory" and "does_not_fit".

  budget   one column per sequence length T. Top: time per iteration / full BPTT's
           against the memory budget, as a fraction of full BPTT's measured iteration peak (log);
           the budgeted methods (planner, uniform VLRNN at its best K, revolve at its best slot
           count) at their budget, sqrt(T) checkpointing and full BPTT at their measured peak;
           bars: the ratio's 95 % interval, hollow markers: noisy. Bottom: the measured step
           peak of every run over its budget (a line at 1: above it the run did not fit).
"""
from collections import defaultdict

from . import common, stats
from .common import (noisy_legend_handle, plot_ratio_points, plt, save, shared_legend,
                     time_summary)

STYLE = {
    "planner": dict(color="C3", marker="o", label="planner (DP, budget)"),
    "uniform": dict(color="C0", marker="s", label="uniform VLRNN, best K under budget"),
    "revolve": dict(color="C2", marker="^", label="revolve, best slots under budget"),
    "sqrt": dict(color="C1", marker="D", label="sqrt(T) checkpointing (one point per run)"),
    "full": dict(color="k", marker="*", label="full BPTT"),
}
BUDGETED = ("planner", "uniform", "revolve")
# On a bidirectional model the planner runs bivlrnn at the largest K under the budget, and
# "sqrt" is bivlrnn at K = sqrt(T) (experiments/lib/budget_choice.h).
BIDIRECTIONAL_LABELS = {
    "planner": "planner: bivlrnn, the largest K under the budget",
    "sqrt": "bivlrnn at K = sqrt(T) (one point per run)",
}


def is_bidirectional(records):
    return any((r.get("run") or {}).get("method_name") == "bivlrnn" for r in records)


def accepts(record):
    return record.get("kind") in ("measured", "theory", "does_not_fit")


def ratio(record):
    """{value, ci, noisy} of a measured record's time ratio to full BPTT: the ratio of median
    times, with the 95 % bootstrap interval over paired rounds (`paired_time_ratio_ci`) and
    `time_ratio_noisy` the budget command recorded."""
    return {"value": record["time_ratio"], "ci": record["paired_time_ratio_ci"],
            "noisy": record["time_ratio_noisy"]}


def fraction(record):
    return record.get("budget_fraction") or record["budget_bytes"] / record["full_peak_bytes"]


def annotate_planner(ax, xs, qs, rs, T):
    """Under each planner point, what its schedule spends the budget on: the steps it
    recomputes as a share of T and, when it keeps tapes (NOTE [ Kept tapes ]), how many.
    Every other label sits lower, so that neighbours on the log axis do not overlap."""
    for i, (x, q, r) in enumerate(zip(xs, qs, rs)):
        chosen = r.get("chosen") or {}
        predicted = chosen.get("predicted") or {}
        if q["value"] is None:
            continue
        if "forward_no_grad_steps" in predicted:
            text = f"{predicted['forward_no_grad_steps'] / T:.0%}"
            if predicted.get("kept_tapes"):
                text += f"\n{predicted['kept_tapes']} kept"
        elif "K=" in chosen.get("schedule", ""):  # a bidirectional model: bivlrnn's chosen K
            text = "K=" + chosen["schedule"].split("K=")[-1].rstrip(")")
        else:
            continue
        ax.annotate(text, (x, q["value"]), textcoords="offset points",
                    xytext=(0, -16 - 18 * (i % 2)),
                    ha="center", va="top", fontsize=6, color=STYLE["planner"]["color"])


def draw(records, meta, directory, written, skipped):
    name = "budget"
    measured = [r for r in records if r.get("kind") == "measured"
                and (r.get("run") or {}).get("status") == "ok"
                and ("time_ratio" in r or "paired_time_ratio" in r)]
    if not measured:
        return skipped.append(f"{name} (no measured budget records)")
    steps = sorted({r["T"] for r in measured})
    fig, axes = plt.subplots(2, len(steps), figsize=(6.4 * len(steps), 8.2), squeeze=False,
                             sharex="col", gridspec_kw={"height_ratios": [3, 2]})
    with_interval, theory_drawn, capped, over_budget = False, False, set(), False
    styles = {m: dict(st) for m, st in STYLE.items()}
    if is_bidirectional(measured):
        for method, label in BIDIRECTIONAL_LABELS.items():
            styles[method]["label"] = label
    for column, T in enumerate(steps):
        ax, peak_ax = axes[0][column], axes[1][column]
        at_t = [r for r in measured if r["T"] == T]
        fulls = {r["budget_bytes"]: r for r in at_t if r["method"] == "full"}
        full_times = sorted(time_summary(r["run"])["median"] for r in fulls.values())
        full_median = stats.quantile(full_times, 0.5) if full_times else None
        for b in sorted({fraction(r) for r in at_t}):
            ax.axvline(b, color="0.88", lw=0.8, ls=":", zorder=0)
            peak_ax.axvline(b, color="0.88", lw=0.8, ls=":", zorder=0)
        # NOTE [ The revolve curve ]
        # The measured points are measured time / measured full BPTT time. The theory records'
        # predicted_time_ratio divides by the cost model's prediction for full BPTT, which is
        # not that quantity (in results/cpu-budget it predicts 0.083 s for full BPTT at
        # T = 1000 where 0.15-0.33 s were measured, and 16.2 s at T = 10000 where 2.4-2.7 s
        # were): drawn as it is it sat 2-4x away from the measured revolve points. So the curve
        # is the cost model's predicted seconds of each revolve schedule over the *measured*
        # full BPTT median at the same T, placed at its predicted peak over the measured full
        # peak: the same two quantities as the measured points, predicted instead of measured.
        theory = sorted((r for r in records if r.get("kind") == "theory" and r["T"] == T),
                        key=lambda r: r["predicted"]["peak_bytes"])
        # Only beside measured revolve points: alone it sets the axis for nothing to compare.
        if theory and full_median and any(r["method"] == "revolve" for r in at_t):
            # What `budget` itself does at a budget b: the fastest predicted slot count whose
            # predicted peak fits b. So the curve is the lower envelope over the slot counts,
            # a step at each predicted peak, held up to the largest budget measured.
            xs, ys, best = [], [], float("inf")
            for r in theory:
                seconds = r["predicted"]["time_s"]
                if seconds < best:
                    best = seconds
                    xs.append(r["predicted"]["peak_bytes"] / r["full_peak_bytes"])
                    ys.append(seconds / full_median)
            xs.append(max([xs[-1]] + [fraction(r) for r in at_t]))
            ys.append(ys[-1])
            theory_drawn = True
            ax.plot(xs, ys, "--", color="C2", alpha=0.7, lw=1.2, drawstyle="steps-post",
                    label="revolve, cost-model prediction (best s under the budget)")
        for method, style in styles.items():
            rs = sorted((r for r in at_t if r["method"] == method), key=fraction)
            if not rs:
                continue
            if method == "full":
                ax.axhline(1.0, color="k", lw=0.8, ls="--")
                ax.plot([1.0], [1.0], ls="none", ms=9, **style)
            else:
                # Budgeted methods at their budget; sqrt(T) has one configuration whatever the
                # budget: each of its runs at its own measured peak.
                xs = [fraction(r) if method in BUDGETED
                      else common.peak_bytes(r["run"]["memory"]) / r["full_peak_bytes"] for r in rs]
                qs = [ratio(r) for r in rs]
                with_interval |= any(q["ci"] for q in qs)
                plot_ratio_points(ax, xs, qs, style["color"], style["marker"], style["label"],
                                  linestyle="-" if method in BUDGETED else "none")
                over = [(x, q["value"]) for x, q, r in zip(xs, qs, rs)
                        if method in BUDGETED and r.get("fits_budget") is False]
                if over:
                    ax.plot([p[0] for p in over], [p[1] for p in over], "x", color="k", ms=11)
                if method == "planner":
                    annotate_planner(ax, xs, qs, rs, T)
                if method == "revolve":
                    capped |= {r["chosen"]["slots"] for r in rs
                               if (r.get("chosen") or {}).get("slots") == 64}
            # Bottom: every run's measured iteration peak over its budget.
            peak_ax.plot([fraction(r) for r in rs],
                         [common.peak_bytes(r["run"]["memory"]) / r["budget_bytes"] for r in rs],
                         color=style["color"], marker=style["marker"], ms=6,
                         ls="-" if method in BUDGETED else "none",
                         label=style["label"].split(",")[0].split(" (")[0])
        ax.set_xscale("log")
        ax.set_ylabel("time per iteration / full BPTT's")
        ax.set_title(f"T = {T}")
        ax.grid(True, which="both", alpha=0.3)
        over_budget |= any(r.get("fits_budget") is False for r in at_t if r["method"] in BUDGETED)
        peak_ax.axhline(1.0, color="tab:red", lw=1, ls="--")
        peak_ax.set_xscale("log")
        peak_ax.set_yscale("log")
        peak_ax.set_xlabel("memory budget / full BPTT's measured iteration peak (log)")
        peak_ax.set_ylabel("measured iteration peak / budget")
        peak_ax.grid(True, which="both", alpha=0.3)
    # One legend per row, on the last column: the columns show the same methods.
    handles = [noisy_legend_handle()]
    if over_budget:
        handles.append(plt.Line2D([], [], marker="x", color="k", ls="none",
                                  label="measured peak over its budget"))
    shared_legend(list(axes[0]), extra=handles, fontsize=7)
    shared_legend(list(axes[1]), fontsize=7, loc="upper right")
    problem = meta["problem"]  # the budget command's workload (every T of the run)
    fig.suptitle(f"Time overhead over full BPTT under a memory budget: {problem['model']} "
                 f"H={problem['H']} B={problem['B']} F={problem['input']} "
                 f"C={problem['classes']} {problem['dtype']}", fontsize=10)
    missing = [f"{r['method']} at T={r['T']}, budget {fraction(r):.3g}" for r in records
               if r.get("kind") == "does_not_fit"]
    notes = ["Top: ratio of median times, each method measured side by side with full BPTT "
             "in one interleaved run; bars: "
             + ("95 % bootstrap CI over paired rounds" if with_interval
                else "none (one repeat: no interval)")
             + f"; hollow: wider than ±{stats.NOISY_HALF_WIDTH:.0%} or no interval, not a finding."]
    if any(m["method"] == "planner" for m in measured) and is_bidirectional(measured):
        notes.append("Under each planner point: the block length K bivlrnn chose (the largest "
                     "whose measured peak fits the budget).")
    elif any(m["method"] == "planner" for m in measured):
        notes.append("Under each planner point: the steps its schedule recomputes, as a share "
                     "of T, and the tapes it keeps instead of recomputing them, if any.")
    if theory_drawn:
        notes.append("Dashed (not measured): the cost model's predicted seconds of the fastest "
                     "revolve schedule whose predicted peak fits the budget, over the measured "
                     "full BPTT median at that T.")
    if capped:
        notes.append("Revolve's slots are capped at 64: above that budget it runs s = 64, its "
                     "peak far below the budget (bottom).")
    if missing:
        notes.append("No schedule fits: " + "; ".join(missing) + ".")
    save(fig, directory, name, meta, written, " ".join(notes))
