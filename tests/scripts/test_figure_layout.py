#!/usr/bin/env python3
"""ctest plot.figure_layout: every figure plot.py draws keeps its text on the canvas and its
legends off the data.

    /usr/bin/python3 tests/scripts/test_figure_layout.py SOURCE_DIR

Draws every committed result folder under results/ (copies of results.jsonl and meta.json:
the committed figures are never rewritten), the `vlrnn compare --json` sample
tests/scripts/data/compare.json and a made-up sweep from a dirty tree whose planner spec is
displayed under two names (it must still be one legend entry), in this process (two at a time), PNG only.
Each figure is checked while it is saved, with the renderer that draws the PNG, so what is
checked is what the file shows:
  - every text drawn (suptitle, titles, axis labels, tick labels, annotations, legend
    entries, footer) lies inside the canvas;
  - no legend covers a data point: a line's vertices and points every few pixels along its
    segments, scatter points, error bars, bars (reference lines such as axhline, spans
    and fill_between bands are not data points);
  - no legend covers another text (an axis label, an annotation).
The checks wrap matplotlib's own Figure.savefig, Figure.draw and Text.draw, so they need
nothing from the plotting code and judge any version of it.
"""
import concurrent.futures
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

os.environ["VLRNN_PLOT_FORMATS"] = "png"  # one draw per figure; the PDF has the same layout

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib import cbook  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_plot_every_results_dir import copy_of, result_folders, run_plot  # noqa: E402

PLANNER_SWEEP = "made-up-planner-sweep"
# Tolerances in pixels of the saved PNG: antialiasing reaches half a pixel past an extent.
EDGE_SLACK_PX = 1.0
# Points sampled along a line's segments this far apart: a legend over a curve between two
# of its vertices covers data as much as one over a vertex.
SEGMENT_STEP_PX = 3.0

_saving = {"name": None}     # the figure being saved (its file name), None between saves
_drawn_texts = []            # every Text drawn in the current save, with its extent
_problems = []               # "figure: what is wrong", for the figures of this process
_checked = []                # names of the figures checked
_legend_labels = {}          # figure name -> the labels of its legends


# ---------------------------------------------------------------------------------------
# Hooks into matplotlib: record what is drawn, check each figure once it is drawn.

_original_savefig = Figure.savefig
_original_figure_draw = Figure.draw
_original_text_draw = Text.draw


def _savefig(fig, fname, *args, **kwargs):
    _saving["name"] = os.path.basename(str(fname))
    try:
        return _original_savefig(fig, fname, *args, **kwargs)
    finally:
        _saving["name"] = None


def _text_draw(text, renderer):
    _original_text_draw(text, renderer)
    # Text.draw returns early for invisible or empty text; the extent of what was drawn.
    if _saving["name"] and text.get_visible() and text.get_text().strip():
        _drawn_texts.append((text, text.get_window_extent(renderer)))


def _figure_draw(fig, renderer):
    _drawn_texts.clear()
    _original_figure_draw(fig, renderer)
    if _saving["name"]:
        _checked.append(_saving["name"])
        _legend_labels[_saving["name"]] = [t.get_text() for legend, _ in legends_of(fig)
                                           for t in legend.get_texts()]
        _problems.extend(f"{_saving['name']}: {p}" for p in check_figure(fig, renderer))


def install_hooks():
    Figure.savefig = _savefig
    Figure.draw = _figure_draw
    Text.draw = _text_draw


# ---------------------------------------------------------------------------------------
# The checks.

def describe(text):
    words = " ".join(text.get_text().split())
    return repr(words if len(words) <= 60 else words[:57] + "...")


def outside_canvas(extent, canvas):
    """How far an extent reaches past each edge of the canvas, where it does (pixels)."""
    out = {"left": canvas.x0 - extent.x0, "right": extent.x1 - canvas.x1,
           "bottom": canvas.y0 - extent.y0, "top": extent.y1 - canvas.y1}
    return {edge: d for edge, d in out.items() if d > EDGE_SLACK_PX}


def in_data_coordinates(transform, ax):
    """True for artists placed by their data (a reference line such as axhline is placed
    partly in axes coordinates: it is not a data point)."""
    return transform.contains_branch(ax.transData)


def along_segments(xy):
    """The display points of a polyline: its vertices and points every SEGMENT_STEP_PX along
    each segment."""
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) < 2:
        return xy
    pieces = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:]):
        n = max(1, int(math.ceil(np.hypot(*(b - a)) / SEGMENT_STEP_PX)))
        t = np.linspace(0.0, 1.0, n + 1)[1:, None]
        pieces.append(a + t * (b - a))
    return np.vstack(pieces)


def line_points(line, ax):
    xy = line.get_xydata()
    if len(xy) == 0 or not in_data_coordinates(line.get_transform(), ax):
        return np.empty((0, 2))
    drawn_line = line.get_linestyle() not in ("None", "none", "", " ")
    if drawn_line and line.get_drawstyle() in cbook.STEP_LOOKUP_MAP:
        steps = cbook.STEP_LOOKUP_MAP[line.get_drawstyle()](xy[:, 0], xy[:, 1])
        xy = np.column_stack(steps)
    display = line.get_transform().transform(xy)
    return along_segments(display) if drawn_line else display


def collection_points(collection, ax):
    if isinstance(collection, PathCollection):  # scatter: one point per offset
        if not in_data_coordinates(collection.get_offset_transform(), ax):
            return np.empty((0, 2))
        return collection.get_offset_transform().transform(collection.get_offsets())
    if isinstance(collection, LineCollection):  # error bars
        if not in_data_coordinates(collection.get_transform(), ax):
            return np.empty((0, 2))
        paths = [along_segments(collection.get_transform().transform(p.vertices))
                 for p in collection.get_paths()]
        return np.vstack(paths) if paths else np.empty((0, 2))
    return np.empty((0, 2))  # fill_between bands and other areas: not data points


def data_points(ax):
    """Display coordinates of the data points an axes shows (inside it where clipped)."""
    chunks = []
    for line in ax.get_lines():
        if line.get_visible():
            points = line_points(line, ax)
            chunks.append(clip_to(points, ax) if line.get_clip_on() else points)
    for collection in ax.collections:
        if collection.get_visible():
            chunks.append(clip_to(collection_points(collection, ax), ax))
    return np.vstack(chunks) if chunks else np.empty((0, 2))


def clip_to(points, ax):
    box = ax.bbox
    inside = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1)
              & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))
    return points[inside]


def bars(ax, renderer):
    """Extents of the bars an axes draws (rectangles placed in data coordinates)."""
    return [p.get_window_extent(renderer) for p in ax.patches
            if isinstance(p, Rectangle) and p.get_visible()
            and in_data_coordinates(p.get_transform(), ax)
            and p.get_width() != 0 and p.get_height() != 0]


def overlap(a, b):
    """Width and height of the overlap of two extents, shrunk by the slack (0 when apart)."""
    width = min(a.x1, b.x1) - max(a.x0, b.x0) - EDGE_SLACK_PX
    height = min(a.y1, b.y1) - max(a.y0, b.y0) - EDGE_SLACK_PX
    return (width, height) if width > 0 and height > 0 else None


def legends_of(fig):
    found = [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend() is not None]
    return found + [(legend, None) for legend in fig.legends]


def where(ax, fig):
    title = ax.get_title() or ax.get_ylabel() or ""
    return f"axes {fig.axes.index(ax)} ({' '.join(title.split())[:40]!r})"


def check_texts_on_canvas(fig):
    problems = []
    for text, extent in _drawn_texts:
        out = outside_canvas(extent, fig.bbox)
        if out:
            reach = ", ".join(f"{d:.0f} px past the {edge}" for edge, d in out.items())
            problems.append(f"text {describe(text)} is cut off: {reach} of the canvas")
    return problems


def check_legends(fig, renderer):
    problems = []
    for legend, owner in legends_of(fig):
        if not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        name = f"legend of {where(owner, fig)}" if owner else "figure legend"
        for ax in fig.axes:
            points = data_points(ax)
            covered = points[(points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                             & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)]
            if len(covered):
                problems.append(f"{name} covers {len(covered)} data points of {where(ax, fig)}")
            hidden_bars = [b for b in bars(ax, renderer) if overlap(b, box)]
            if hidden_bars:
                problems.append(f"{name} covers {len(hidden_bars)} bars of {where(ax, fig)}")
        own = set(map(id, legend.get_texts())) | {id(legend.get_title())}
        for text, extent in _drawn_texts:
            if id(text) not in own and overlap(extent, box):
                problems.append(f"{name} covers the text {describe(text)}")
    return problems


def check_figure(fig, renderer):
    return check_texts_on_canvas(fig) + check_legends(fig, renderer)


# ---------------------------------------------------------------------------------------
# Drawing every kind of figure.

def draw_and_check(target):
    """Runs plot.py on `target` in this process; (target, exit code, output, figures
    checked, problems, {figure: legend labels}, seconds)."""
    install_hooks()
    _problems.clear()
    _checked.clear()
    _legend_labels.clear()
    start = time.time()
    code, stdout, stderr = run_plot(target)
    return (target, code, stdout + stderr, list(_checked), list(_problems),
            dict(_legend_labels), time.time() - start)


def planner_sweep(source, scratch):
    """A made-up sweep folder: results/cpu-quick's memory_vs_T records plus a planner
    (`planner:percent=30`, no K) at every T, whose display name says at the smallest T that
    its budget was raised (its one spec must make one curve and one legend entry), measured
    from a dirty tree."""
    folder = os.path.join(scratch, PLANNER_SWEEP)
    os.makedirs(folder)
    results = os.path.join(source, "results", "cpu-quick")
    with open(os.path.join(results, "meta.json")) as f:
        meta = json.load(f)
    meta["git_dirty"] = True  # the DIRTY TREE line must fit on the canvas too
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(results, "results.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r for r in records if r.get("experiment") == "memory_vs_T"]
    fulls = sorted((r for r in records if r["method"] == "full"), key=lambda r: r["T"])
    for i, full in enumerate(fulls):
        planner = json.loads(json.dumps(full))
        planner.update(method="planner:percent=30", method_name="planner", K=None,
                       key=full["key"].replace("|full|", "|planner:percent=30|"),
                       method_description="planner(30% of full)")
        if i == 0:
            planner["method_description"] = ("planner(30% of full, raised to 1048576 bytes: "
                                             "the smallest it can honour)")
        planner["memory"]["iteration_peak_bytes"] = int(planner["memory"]["iteration_peak_bytes"] * 0.3)
        records.append(planner)
    with open(os.path.join(folder, "results.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return folder


def check_planner_sweep(legend_labels):
    labels = legend_labels.get("memory_vs_T.png", [])
    planners = [label for label in labels if label.startswith("planner")]
    if len(planners) != 1:
        return [f"memory_vs_T.png: expected one legend entry for the spec planner:percent=30 "
                f"(its display name changes with T), got {len(planners)}: {planners}"]
    return []


def copy_targets(source, scratch):
    """Copies of every committed result folder and of the compare sample; their paths."""
    results = os.path.join(source, "results")
    targets = []
    for folder in result_folders(results):
        targets.append(copy_of(results, folder, scratch))
    sample = os.path.join(source, "tests", "scripts", "data", "compare.json")
    shutil.copy(sample, os.path.join(scratch, "compare.json"))
    targets.append(os.path.join(scratch, "compare.json"))
    targets.append(planner_sweep(source, scratch))
    return targets


def main(source):
    failures, checked = [], 0
    start = time.time()
    with tempfile.TemporaryDirectory() as scratch:
        targets = copy_targets(source, scratch)
        # fork: each worker imports plot.py once and draws its share of the targets.
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
            jobs = [pool.submit(draw_and_check, t) for t in targets]
            for job in jobs:
                target, code, output, figures, problems, labels, seconds = job.result()
                if os.path.basename(target) == PLANNER_SWEEP:
                    problems += check_planner_sweep(labels)
                name = os.path.basename(target)
                checked += len(figures)
                print(f"{name}: exit {code}, {len(figures)} figures checked, "
                      f"{len(problems)} problems, {seconds:.1f} s")
                if code != 0:
                    failures.append(f"{name}: plot.py exited {code}:\n{output}")
                elif not figures:
                    failures.append(f"{name}: plot.py drew no figure:\n{output}")
                failures += [f"{name}/{p}" for p in problems]
    for failure in failures:
        print("FAILED " + failure)
    print(f"{len(targets)} targets, {checked} figures checked, {len(failures)} failures, "
          f"{time.time() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
