"""Where a figure's pieces go, so that every text stays on the canvas and no legend covers
data (tests/scripts/figure_layout.py checks both on every figure plot.py draws).

`arrange` runs last, from common.save:
  - the footer sits at the bottom, wrapped to the canvas, and the axes are laid out above it
    (tight_layout in the rectangle the footer leaves);
  - a title or axis label longer than the room it has is wrapped onto more lines. No layout
    can do this: a y label taller than its axes ran off the canvas whatever the margins;
  - a legend made with `legend(ax, ...)` stays where its options put it (default "best")
    unless it covers a data point or another text; then it tries "best", and if that covers
    something too it moves beside its axes, right of everything drawn there (a twin axis's
    labels), and the figure widens by as much, so that the plot keeps its size.
"""
import textwrap
import weakref
from collections import defaultdict

import numpy as np
from matplotlib import cbook
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.patches import Rectangle
from matplotlib.path import Path
from matplotlib.transforms import Bbox, ScaledTranslation

PAD_INCHES = 0.06
# Fewer characters a line than this and a wrapped text reads worse than a cut one would;
# wrapping stops there (the figure test then names the text).
MIN_WRAP_CHARS = 12

# legend -> (handles, labels, options): what `legend` was given, to make it again elsewhere.
_LEGEND_ARGS = weakref.WeakKeyDictionary()
# text -> its words before any wrapping, so that a second wrap starts from them.
_UNWRAPPED = weakref.WeakKeyDictionary()


def legend(ax, handles=None, labels=None, **options):
    """ax.legend (all of the axes' labelled artists when no handles are given), which
    `arrange` may move where it covers no data; options as ax.legend's, loc default "best"."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    made = ax.legend(handles, labels, **{"loc": "best", **options})
    _LEGEND_ARGS[made] = (handles, labels, options)
    return made


# ---------------------------------------------------------------------------------------
# What a legend must not cover.

def _in_data_coordinates(transform, ax):
    # axhline, axvline and spans sit partly in axes coordinates: references, not data.
    return transform.contains_branch(ax.transData)


def _line_display_xy(line):
    xy = line.get_xydata()
    if line.get_drawstyle() in cbook.STEP_LOOKUP_MAP and line.get_drawstyle() != "default":
        xy = np.column_stack(cbook.STEP_LOOKUP_MAP[line.get_drawstyle()](xy[:, 0], xy[:, 1]))
    xy = line.get_transform().transform(xy)
    return xy[np.isfinite(xy).all(axis=1)]


def _any_inside(points, box):
    return bool(len(points)) and bool(np.any(
        (points[:, 0] > box.x0) & (points[:, 0] < box.x1)
        & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)))


def _path_crosses(points, box):
    return len(points) > 1 and Path(points).intersects_bbox(box, filled=False)


def _lines_under(ax, box):
    for line in ax.get_lines():
        if not line.get_visible() or not _in_data_coordinates(line.get_transform(), ax):
            continue
        xy = _line_display_xy(line)
        drawn = line.get_linestyle() not in ("None", "none", "", " ")
        if _any_inside(xy, box) or (drawn and _path_crosses(xy, box)):
            return True
    return False


def _collections_under(ax, box):
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # scatter points
            offsets = collection.get_offset_transform()
            if (_in_data_coordinates(offsets, ax)
                    and _any_inside(offsets.transform(collection.get_offsets()), box)):
                return True
        elif isinstance(collection, LineCollection):  # error bars
            if _in_data_coordinates(collection.get_transform(), ax) and any(
                    _any_inside(xy, box) or _path_crosses(xy, box)
                    for xy in (collection.get_transform().transform(p.vertices)
                               for p in collection.get_paths())):
                return True
    return False  # bands (fill_between) are spread, not data points


def _bars_or_texts_under(ax, box, renderer):
    for patch in ax.patches:
        if (isinstance(patch, Rectangle) and patch.get_visible()
                and _in_data_coordinates(patch.get_transform(), ax)
                and patch.get_width() and patch.get_height()
                and box.overlaps(patch.get_window_extent(renderer))):
            return True
    return any(text.get_visible() and text.get_text().strip()
               and box.overlaps(text.get_window_extent(renderer)) for text in ax.texts)


def covers_something(fig, legend_, renderer):
    """Whether a legend lies over a data point, a line between two, an error bar, a bar or
    an annotation of any axes (a twin axis's too)."""
    box = legend_.get_window_extent(renderer)
    for ax in fig.axes:
        if not ax.get_visible() or not box.overlaps(ax.bbox):
            continue
        seen = Bbox.intersection(box, ax.bbox)  # what is clipped to the axes shows there only
        if seen is not None and (_lines_under(ax, seen) or _collections_under(ax, seen)):
            return True
        if _bars_or_texts_under(ax, box, renderer):
            return True
    return False


# ---------------------------------------------------------------------------------------
# Moving legends.

def _remake(ax, old, **placement):
    handles, labels, options = _LEGEND_ARGS[old]
    made = ax.legend(handles, labels, **{**options, **placement})
    _LEGEND_ARGS[made] = (handles, labels, {**options, **placement})
    return made


def _right_of_decorations(ax, renderer):
    """Inches from the axes' right edge to the right of its y axes' labels (a twin's on the
    right), plus a pad: where a legend beside it starts."""
    fig = ax.figure
    right = ax.bbox.x1
    for other in fig.axes:
        if other.get_position().bounds == ax.get_position().bounds:  # ax and its twins
            extent = other.yaxis.get_tightbbox(renderer)
            if extent is not None:
                right = max(right, extent.x1)
    return (right - ax.bbox.x1) / fig.dpi + PAD_INCHES


def _row(ax):
    """The grid row of a subplot (0 for an axes placed by hand)."""
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    return spec.rowspan.start if spec is not None else 0


def _our_legends(fig):
    return [(ax, ax.get_legend()) for ax in fig.axes
            if ax.get_legend() is not None and ax.get_legend() in _LEGEND_ARGS]


def settle_legends(fig):
    """Moves each legend made by `legend` that covers something: to "best", then beside its
    axes; widens the figure for those beside. True when one moved."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    moved = False
    for ax, old in _our_legends(fig):
        if (_LEGEND_ARGS[old][2].get("loc", "best") != "best"
                and covers_something(fig, old, renderer)):
            _remake(ax, old, loc="best")
            moved = True
    if moved:
        fig.canvas.draw()
    widen_by_row = defaultdict(float)
    for ax, old in _our_legends(fig):
        if not covers_something(fig, old, renderer):
            continue
        gap = _right_of_decorations(ax, renderer)
        beside = _remake(ax, old, loc="upper left", bbox_to_anchor=(1, 1), borderaxespad=0,
                         bbox_transform=ax.transAxes + ScaledTranslation(gap, 0, fig.dpi_scale_trans))
        widen_by_row[_row(ax)] += beside.get_window_extent(renderer).width / fig.dpi + gap
        moved = True
    if widen_by_row:
        fig.set_figwidth(fig.get_figwidth() + max(widen_by_row.values()))
    return moved


# ---------------------------------------------------------------------------------------
# Wrapping texts longer than their room.

def _wrap(text, room_px, renderer, afresh=False):
    """Wraps `text` onto more lines until it fits `room_px` along its direction (afresh: from
    its words before any wrapping, for a room that may have grown). True when its words
    changed."""
    if not text.get_visible() or not text.get_text().strip():
        return False
    before = text.get_text()
    if afresh and text in _UNWRAPPED:
        text.set_text(_UNWRAPPED[text])
    vertical = abs(text.get_rotation() % 180 - 90) < 1

    def length():
        extent = text.get_window_extent(renderer)
        return extent.height if vertical else extent.width

    if length() <= room_px:
        return text.get_text() != before
    words = _UNWRAPPED.setdefault(text, text.get_text())
    chars = int(max(len(line) for line in text.get_text().split("\n")) * room_px / length())
    while chars >= MIN_WRAP_CHARS:
        text.set_text("\n".join(textwrap.fill(line, chars) if line else line
                                for line in words.split("\n")))
        if length() <= room_px:
            break
        chars -= max(1, chars // 12)
    return text.get_text() != before


def wrap_long_texts(fig, skip=()):
    """Figure texts wider than the canvas, titles and x labels wider than their axes, y
    labels taller than theirs: wrapped. True when one changed."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    pad = PAD_INCHES * fig.dpi
    changed = False
    for text in fig.texts:
        if text not in skip:
            changed |= _wrap(text, fig.bbox.width - 2 * pad, renderer)
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:
            changed |= _wrap(ax.title, ax.bbox.width, renderer)
            changed |= _wrap(ax.xaxis.label, ax.bbox.width, renderer)
            changed |= _wrap(ax.yaxis.label, ax.bbox.height, renderer)
    return changed


# ---------------------------------------------------------------------------------------
# The footer and the whole arrangement.

def layout_above(fig, footer_texts):
    """Stacks the footer's texts from the bottom up (each wrapped to the canvas) and lays out
    the axes in the rest of the figure."""
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width - 2 * PAD_INCHES * fig.dpi
    y_px = 0.005 * fig.bbox.height
    for text in footer_texts:
        _wrap(text, width, renderer, afresh=True)
        text.set_y(y_px / fig.bbox.height)
        y_px = text.get_window_extent(renderer).y1 + 0.02 * fig.dpi
    bottom = min(0.6, y_px / fig.bbox.height + PAD_INCHES / fig.get_figheight())
    fig.tight_layout(rect=(0, bottom, 1, 1))


def arrange(fig, footer_texts):
    """The final layout (see the module's docstring); footer_texts bottom first."""
    layout_above(fig, footer_texts)
    # Each change can call for another: a legend beside its axes or a wrapped label narrows
    # them, which moves a "best" legend and shortens the room of another label.
    for _ in range(3):
        moved = settle_legends(fig)
        if not (wrap_long_texts(fig, skip=footer_texts) or moved):
            return
        layout_above(fig, footer_texts)
