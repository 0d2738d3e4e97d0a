"""The class overview's figures, as PNG files (matplotlib, Agg backend); the
students' pages draw theirs as inline SVG (``svg.py``)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402


COLOR = "#3b6ea8"


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def score_histogram(percentages: list[float], path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(percentages, bins=[i * 10 for i in range(11)], color=COLOR, edgecolor="white")
    ax.set_xlabel("total score (%)")
    ax.set_ylabel("students")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, 100)
    return _save(fig, path)


def pass_rates(labels: list[str], rates: list[float], path: Path, xlabel: str) -> str:
    height = max(2.5, 0.32 * len(labels) + 0.8)
    fig, ax = plt.subplots(figsize=(6, height))
    ax.barh(labels[::-1], [r * 100 for r in rates[::-1]], color=COLOR)
    ax.set_xlim(0, 100)
    ax.set_xlabel(xlabel)
    return _save(fig, path)


def pitfall_counts(counts: Counter, path: Path, top: int = 12) -> str | None:
    if not counts:
        return None
    common = counts.most_common(top)
    fig, ax = plt.subplots(figsize=(6, max(2.5, 0.32 * len(common) + 0.8)))
    ax.barh([name for name, _ in common][::-1], [n for _, n in common][::-1], color="#c0504d")
    ax.set_xlabel("students whose failures point to this pitfall")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)
