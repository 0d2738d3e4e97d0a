"""The figures of students' pages, as inline SVG.

A class of hundreds gets a page each, so these are drawn as markup (about a
millisecond each) rather than rendered by matplotlib (about 80 ms a PNG, which
was most of grading 100 submissions of exercise 01). The class overview's
figures are SVG files too (``plots.py``); the heat maps use viridis from
``palette.py``, matplotlib's map without importing matplotlib.
"""
from __future__ import annotations

import math

from markupsafe import Markup, escape
from grader.report.palette import COLOR, viridis  # COLOR: the class figures' blue

MEAN_COLOR = "#bbbbbb"
NO_VALUE = "#dddddd"  # a NaN or an infinity in the student's result


def score_bars(exercises: list[str], mine: list[float], class_mean: list[float]) -> Markup:
    """Per exercise, the student's score (0..1) next to the class mean, as bars."""
    left, top, plot_h, group_w = 34, 8, 120, 44
    width, height = left + group_w * max(1, len(exercises)) + 8, top + plot_h + 40
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             'xmlns="http://www.w3.org/2000/svg"><title>your score per exercise next to the class mean</title>']
    for percent in (0, 50, 100):
        y = top + plot_h * (1 - percent / 100)
        parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{percent}%</text>')
    for i, (exercise, me, mean) in enumerate(zip(exercises, mine, class_mean)):
        x = left + group_w * i + 6
        for offset, value, color, who in ((0, me, COLOR, "you"), (16, mean, MEAN_COLOR, "class mean")):
            bar_h = plot_h * min(max(value, 0.0), 1.0)
            parts.append(f'<rect x="{x + offset}" y="{top + plot_h - bar_h:.1f}" width="15" height="{bar_h:.1f}" '
                         f'fill="{color}"><title>{escape(exercise)} {who}: {value:.0%}</title></rect>')
        parts.append(f'<text x="{x + 16}" y="{top + plot_h + 14}" text-anchor="middle" font-size="11">'
                     f'{escape(exercise)}</text>')
    legend_y = top + plot_h + 30
    parts.append(f'<rect x="{left}" y="{legend_y - 8}" width="10" height="10" fill="{COLOR}"/>'
                 f'<text x="{left + 14}" y="{legend_y + 1}" font-size="10">you</text>'
                 f'<rect x="{left + 50}" y="{legend_y - 8}" width="10" height="10" fill="{MEAN_COLOR}"/>'
                 f'<text x="{left + 64}" y="{legend_y + 1}" font-size="10">class mean</text></svg>')
    return Markup("".join(parts))


def _cells(data: list[list[float]], x0: float, y0: float, cell: float, low: float, high: float) -> str:
    span = (high - low) or 1.0
    rects = []
    for r, row in enumerate(data):
        for c, value in enumerate(row):
            if isinstance(value, (int, float)) and math.isfinite(value):
                color = viridis((value - low) / span)
            else:
                color = NO_VALUE
            rects.append(f'<rect x="{x0 + c * cell:.1f}" y="{y0 + r * cell:.1f}" width="{cell:.2f}" '
                         f'height="{cell:.2f}" fill="{color}"/>')
    return "".join(rects)


def _is_matrix(data) -> bool:
    return (isinstance(data, list) and bool(data) and all(isinstance(row, list) and row for row in data)
            and len({len(row) for row in data}) == 1)


def side_by_side(student: list | None, expected: list, title: str) -> Markup:
    """The student's 2-D result next to the expected one, on one colour scale
    (the expected result's range) and one cell size, with a colour bar."""
    panel, top = 200.0, 18
    finite = [v for row in expected for v in row if math.isfinite(v)] or [0.0]
    low, high = min(finite), max(finite)
    shown = [m for m in (student, expected) if _is_matrix(m)]
    cell = panel / max(max(len(m), len(m[0])) for m in shown)
    width, height = 2 * panel + 100, top + panel + 6
    parts = [f'<svg class="heatmaps" role="img" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" shape-rendering="crispEdges" xmlns="http://www.w3.org/2000/svg">'
             f'<title>{escape(title)}</title>']
    for i, (data, label) in enumerate(((student, "yours"), (expected, "expected"))):
        x0 = i * (panel + 20)
        parts.append(f'<text x="{x0 + panel / 2}" y="12" text-anchor="middle" font-size="11">{label}</text>')
        if _is_matrix(data):
            parts.append(_cells(data, x0, top, cell, low, high))
        else:
            parts.append(f'<rect x="{x0}" y="{top}" width="{panel}" height="{panel}" fill="none" stroke="#ccc"/>'
                         f'<text x="{x0 + panel / 2}" y="{top + panel / 2}" text-anchor="middle" font-size="12" '
                         f'fill="#c62828">no result</text>')
    # The colour bar: ten steps of the map, high at the top (no gradient ids to clash between figures).
    bar_x, step = 2 * panel + 40, panel / 10
    parts += [f'<rect x="{bar_x}" y="{top + k * step:.1f}" width="12" height="{step + 0.5:.1f}" '
              f'fill="{viridis(1 - (k + 0.5) / 10)}"/>' for k in range(10)]
    parts.append(f'<text x="{bar_x + 16}" y="{top + 9}" font-size="10">{high:.3g}</text>'
                 f'<text x="{bar_x + 16}" y="{top + panel}" font-size="10">{low:.3g}</text></svg>')
    return Markup("".join(parts))
