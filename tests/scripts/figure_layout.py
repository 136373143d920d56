"""The figure checks of ctest plot.every_results_dir (tests/scripts/test_plot_every_results_dir.py):
every figure plot.py draws keeps its text on the canvas and its legends off the data.

Each figure is checked while its PNG is saved, with the renderer that draws it, so what is
checked is what the file shows (the PDF has the same layout):
  - every text drawn (suptitle, titles, axis labels, tick labels, annotations, legend
    entries, footer) lies inside the canvas;
  - no legend covers a data point: a line's vertices and points every few pixels along its
    segments, scatter points, error bars, bars (reference lines such as axhline, spans
    and fill_between bands are not data points);
  - no legend covers another text (an axis label, an annotation).
The checks wrap matplotlib's own Figure.savefig, Figure.draw and Text.draw, so they need
nothing from the plotting code and judge any version of it. Besides the committed folders,
two targets of their own: the `vlrnn compare --json` sample tests/scripts/data/compare.json
and a made-up sweep from a dirty tree whose planner spec is displayed under two names (it
must still be one legend entry).
"""
import contextlib
import io
import json
import math
import os
import sys
import time
import traceback

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib import cbook  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402

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
    # The PNG's save is checked: its renderer works in the pixels the slack is set in.
    name = os.path.basename(str(fname))
    _saving["name"] = name if name.endswith(".png") else None
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

def run_plot(target):
    """`python3 scripts/plot.py TARGET` as plot.py's main(), in this process (a process per
    target spent most of its time importing matplotlib): (exit code, stdout, stderr), as a
    process of its own would end: SystemExit's code, or an exception's traceback and 1."""
    import plot  # noqa: E402  scripts/plot.py, imported once per process
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = plot.main(["plot.py", target])
        except SystemExit as stop:  # as the interpreter ends on it
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
    return code, out.getvalue(), err.getvalue()


def draw_and_check(target):
    """Runs plot.py on `target` in this process; (exit code, output, figures checked,
    problems, {figure: legend labels}, seconds)."""
    install_hooks()
    _problems.clear()
    _checked.clear()
    _legend_labels.clear()
    start = time.time()
    code, stdout, stderr = run_plot(target)
    return (code, stdout + stderr, list(_checked), list(_problems),
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


def checks_catch_a_bad_figure(scratch):
    """The checks themselves: a figure with a legend over its line and a title off the canvas
    must be reported for both (a check that passes everything would pass every folder).
    Returns what is wrong with the checks, empty when they catch both."""
    import matplotlib.pyplot as plt
    install_hooks()
    _problems.clear()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.legend(loc="center")  # on the line's middle
    fig.text(1.2, 0.5, "past the right edge")
    fig.savefig(os.path.join(scratch, "bad.png"))
    plt.close(fig)
    found = " | ".join(_problems)
    wanted = ("covers", "past the right")
    return [f"the layout checks missed a figure with '{w}' (they reported: {found or 'nothing'})"
            for w in wanted if w not in found]


def check_planner_sweep(legend_labels):
    labels = legend_labels.get("memory_vs_T.png", [])
    planners = [label for label in labels if label.startswith("planner")]
    if len(planners) != 1:
        return [f"memory_vs_T.png: expected one legend entry for the spec planner:percent=30 "
                f"(its display name changes with T), got {len(planners)}: {planners}"]
    return []
