#!/usr/bin/env python3
"""Figures from any VLRNN result folder, or from a `vlrnn compare --json` file.

    python3 scripts/plot.py DIR         # DIR holds results.jsonl and meta.json
    python3 scripts/plot.py FILE.json   # written by `vlrnn compare ... --json FILE.json`

A compare file gets one figure, FILE-figures/compare.png and .pdf beside it (cmp.json:
cmp-figures/): time per iteration per method (median; bar: the spread of the repeats) with
its paired ratio to full BPTT, and iteration peak memory per method (scripts/vlrnn_plots/
compare.py). A folder's figures are chosen from what its records hold and written to
DIR/figures/<name>.png and .pdf:
  sweep records   (`vlrnn sweep`, `vlrnn merge`; kind "grid", "max_batch"):
                  memory_vs_T, time_vs_block, memory_vs_utilization, max_batch, tbptt_error
  budget records  (`vlrnn budget`; kind "measured", "theory"): budget
  bench records   (Google Benchmark programs, converted by scripts/bench_to_records.py;
                  kind "bench"): relative_speed_b{B}, gflops, memory
  verify records  (`vlrnn verify --out DIR`; kind "verify"): verify_max_rel
  train records   (`vlrnn train CONFIG --out DIR`; kind "train_step", "train_run"):
                  loss_vs_step, loss_vs_time, deviation_from_full
  python peers    (scripts/bench_python.py; kind "python_peer"): python_peers
The figures are described in scripts/vlrnn_plots/{sweep,budget,bench,verify,train,peers}.py. Every time
point carries its spread (IQR with 5 or more repeats, else min-max); every ratio its 95 %
interval, hollow where it is wider than ±10 % (noisy). Every footer names the command or
config and the commit, and says DIRTY TREE in red for a run from uncommitted code. A figure
without the data it needs is skipped with a note, never an error. Text stays on the canvas
and a legend that would cover data moves beside its axes (scripts/vlrnn_plots/layout.py).
matplotlib only (Agg). VLRNN_PLOT_FORMATS=png writes PNG only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from system_python import require  # noqa: E402

require("matplotlib")
from vlrnn_plots import bench, budget, common, compare, peers, sweep, train, verify  # noqa: E402

KINDS = (sweep, budget, bench, verify, train, peers)


def compare_figures_folder(path):
    """Where the figures of a compare file go: beside it, FILE-figures/ (cmp.json: cmp-figures/)."""
    stem = os.path.splitext(path)[0] if path.endswith(".json") else path
    return stem + "-figures"


def draw_compare_file(path):
    meta, records = compare.load(path)
    out = compare_figures_folder(path)
    written, skipped = [], []
    compare.draw(meta, records, out, written, skipped)
    for name in written:
        print(f"plot.py: wrote {out}/{name} ({', '.join(common.FORMATS)})")
    for note in skipped:
        print(f"plot.py: skipped {note}")
    return 0 if written else 1


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    if os.path.isfile(argv[1]):
        return draw_compare_file(argv[1])
    directory = argv[1]
    records, meta = common.load(directory)
    written, skipped = [], []
    drawn = False
    for kind in KINDS:
        mine = [r for r in records if kind.accepts(r)]
        if mine:
            drawn = True
            kind.draw(mine, meta, directory, written, skipped)
    out = os.path.join(directory, "figures")
    for name in written:
        print(f"plot.py: wrote {out}/{name} ({', '.join(common.FORMATS)})")
    for note in skipped:
        print(f"plot.py: skipped {note}")
    if not drawn:
        kinds = sorted({str(r.get("kind")) for r in records})
        print(f"plot.py: {directory}: no record of a kind this script draws "
              f"(found kinds: {', '.join(kinds) or 'none'})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
