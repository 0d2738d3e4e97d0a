"""Figures for the report, as PNG files (matplotlib, Agg backend)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

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
    return _save(fig, path)


def student_scores(exercises: list[str], mine: list[float], class_mean: list[float], path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 2.8))
    xs = range(len(exercises))
    ax.bar([x - 0.2 for x in xs], [m * 100 for m in mine], width=0.4, color=COLOR, label="you")
    ax.bar([x + 0.2 for x in xs], [m * 100 for m in class_mean], width=0.4, color="#bbbbbb", label="class mean")
    ax.set_xticks(list(xs), exercises)
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (%)")
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def side_by_side(student: list | None, expected: list, path: Path) -> str:
    """The student's 2-D result next to the expected one, on one colour scale."""
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2))
    low = min(min(row) for row in expected)
    high = max(max(row) for row in expected)
    for ax, data, title in ((axes[0], student, "yours"), (axes[1], expected, "expected")):
        ax.set_title(title, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        if data is None:
            ax.text(0.5, 0.5, "no result", ha="center", va="center", transform=ax.transAxes, color="#c62828")
            continue
        image = ax.imshow(data, vmin=low, vmax=high, cmap="viridis", aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=axes, shrink=0.85)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
