"""The class overview's figures, as SVG files drawn as markup (the students'
pages draw theirs inline, ``svg.py``).

They were matplotlib PNGs: importing matplotlib cost ~0.8 s of every
``grader grade`` before anything was graded, and each PNG ~80 ms. Three
charts of bars need no plotting library: a histogram of total scores, the
mean score per exercise, and the most frequent pitfalls. Count axes carry
whole-number ticks only (a student is not divisible).
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from markupsafe import escape

from grader.report.palette import COLOR, PITFALL_COLOR

__all__ = ["COLOR", "score_histogram", "pass_rates", "pitfall_counts", "count_ticks"]

_WIDTH = 560
_FONT = 'font-family="sans-serif" font-size="11"'


def count_ticks(highest: float, most: int = 6) -> list[int]:
    """Whole-number ticks from 0 that cover ``highest``: a step of 1, 2, 5,
    10, 20, 50, ... so that there are at most ``most`` of them."""
    top = max(1, math.ceil(highest))
    steps = (m * 10 ** e for e in range(20) for m in (1, 2, 5))
    step = next(s for s in steps if math.ceil(top / s) <= most - 1)
    last = step * math.ceil(top / step)
    return list(range(0, last + 1, step))


def _write(parts: list[str], width: int, height: int, title: str, path: Path) -> str:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" {_FONT}><title>{escape(title)}</title>'
           f'<rect width="{width}" height="{height}" fill="white"/>{"".join(parts)}</svg>')
    path.write_text(svg, encoding="utf-8")
    return path.name


def _vertical_grid(ticks: list[float], x0: float, width: float, y0: float, height: float, label: str) -> list[str]:
    """Grid lines and tick labels of a horizontal value axis (left to right)."""
    parts = []
    for tick in ticks:
        x = x0 + width * tick / ticks[-1]
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y0 + height}" stroke="#e3e3e3"/>'
                     f'<text x="{x:.1f}" y="{y0 + height + 14}" text-anchor="middle">{tick:g}</text>')
    parts.append(f'<line x1="{x0}" x2="{x0 + width}" y1="{y0 + height}" y2="{y0 + height}" stroke="#555"/>'
                 f'<text x="{x0 + width / 2:.1f}" y="{y0 + height + 32}" text-anchor="middle">{escape(label)}</text>')
    return parts


def score_histogram(percentages: list[float], path: Path) -> str:
    """Students per tenth of the total score (0-10 %, ..., 90-100 %)."""
    bins = [0] * 10
    for value in percentages:
        if math.isfinite(value):
            bins[min(max(int(value // 10), 0), 9)] += 1
    ticks = count_ticks(max(bins))
    left, top, plot_w, plot_h = 44, 10, _WIDTH - 60, 200
    parts = []
    for tick in ticks:  # the count axis: students
        y = top + plot_h * (1 - tick / ticks[-1])
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    bar_w = plot_w / 10
    for i, count in enumerate(bins):
        bar_h = plot_h * count / ticks[-1]
        parts.append(f'<rect x="{left + i * bar_w + 1:.1f}" y="{top + plot_h - bar_h:.1f}" width="{bar_w - 2:.1f}" '
                     f'height="{bar_h:.1f}" fill="{COLOR}"><title>{10 * i}-{10 * i + 10} %: {count} '
                     f'student(s)</title></rect>')
    for percent in range(0, 101, 20):
        x = left + plot_w * percent / 100
        parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{percent}</text>')
    parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#555"/>'
                 f'<text x="{left + plot_w / 2}" y="{top + plot_h + 32}" text-anchor="middle">total score (%)</text>'
                 f'<text transform="translate(12 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">students</text>')
    return _write(parts, _WIDTH, top + plot_h + 42, "distribution of total scores", path)


def _bars(labels: list[str], values: list[float], ticks: list[float], color: str, xlabel: str, title: str,
          path: Path, unit: str = "") -> str:
    """Horizontal bars, the first label at the top."""
    left = min(220, 12 + 7 * max((len(label) for label in labels), default=4))
    top, row_h = 8, 24
    plot_w, plot_h = _WIDTH - left - 20, row_h * max(1, len(labels))
    parts = _vertical_grid(ticks, left, plot_w, top, plot_h, xlabel)
    for i, (label, value) in enumerate(zip(labels, values)):
        y = top + i * row_h
        bar_w = plot_w * min(max(value, 0.0), ticks[-1]) / ticks[-1] if math.isfinite(value) else 0.0
        parts.append(f'<text x="{left - 6}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end">{escape(label)}</text>'
                     f'<rect x="{left}" y="{y + 3}" width="{bar_w:.1f}" height="{row_h - 6}" fill="{color}">'
                     f'<title>{escape(label)}: {value:g}{unit}</title></rect>')
    return _write(parts, _WIDTH, top + plot_h + 42, title, path)


def pass_rates(labels: list[str], rates: list[float], path: Path, xlabel: str) -> str:
    """One bar per label: its rate (0..1) as a percentage."""
    return _bars(labels, [round(100 * r, 1) for r in rates], [0, 20, 40, 60, 80, 100], COLOR, xlabel,
                 xlabel, path, unit="%")


def pitfall_counts(counts: Counter, path: Path, top: int = 12) -> str | None:
    """The ``top`` most frequent pitfalls by students; None when there is none."""
    if not counts:
        return None
    common = counts.most_common(top)
    return _bars([name for name, _ in common], [n for _, n in common], count_ticks(common[0][1]), PITFALL_COLOR,
                 "students whose failures point to this pitfall", "most frequent pitfalls", path)
