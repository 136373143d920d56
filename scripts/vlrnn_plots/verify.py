"""Figure of a `vlrnn verify --out DIR` folder: records of kind "verify".

  verify_max_rel   the worst relative difference to full BPTT of every exact case, per
                   method and dtype, against the tolerance (no time is measured); the
                   title names the models verified
"""
import math

from .common import legend, method_style, order_key, plt, save


def accepts(record):
    return record.get("kind") == "verify"


def what_was_verified(records):
    """The models the cases ran and how many configurations each method ran, e.g. "model
    lstm, 30 configurations" or "9 models (gru, lstm, ...), 2000 configurations"."""
    models = sorted({str(r.get("model", "?")) for r in records})
    # A random case's description can repeat under another seed: the seed tells them apart.
    configurations = len({(r.get("seed"), r.get("case")) for r in records})
    named = f"model {models[0]}" if len(models) == 1 else \
        f"{len(models)} models ({', '.join(models)})"
    return f"{named}, {configurations} configurations"


def draw(records, meta, directory, written, skipped):
    name = "verify_max_rel"
    order = meta.get("methods_in_registry", ["full", "vlrnn", "checkpoint", "tbptt"])
    data = [r for r in records if accepts(r) and r.get("exact", True) and not r.get("error")]
    if not data:
        return skipped.append(f"{name} (no exact cases in the `vlrnn verify --out` records)")
    methods = sorted({r["method"].split(":")[0] for r in data}, key=lambda m: order_key(m, order))
    dtypes = sorted({r["dtype"] for r in data})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.2 * len(dtypes), 4.6), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        rows = [r for r in data if r["dtype"] == dtype]
        tolerance = rows[0]["tolerance"]
        floor = 1e-18  # exact zeros drawn at the floor
        for i, m in enumerate(methods):
            values = [max(r["max_rel"], floor) for r in rows if r["method"].split(":")[0] == m]
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
        legend(ax, fontsize=8, loc="center right")
    fig.suptitle(f"Gradients of the exact methods vs full BPTT: {what_was_verified(data)}",
                 fontsize=10)
    save(fig, directory, name, meta, written,
         "Each dot: one case's largest relative difference over every tensor it compares "
         "(loss, per-step losses, parameter gradients, dL/dh0, dL/dx, final state).")
