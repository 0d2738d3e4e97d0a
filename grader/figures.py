"""The feedback figures of one run: for each figure a check plan names, the
small 2-D tensor the submission's call returned next to the reference's, as
plain lists (bounded in size), with the instructor's axis labels. Inputs are
public ones only (a README's), so a figure never shows a hidden input.

In: a CheckPlan and the decoded RunResults of the submission and the reference.
Out: a dict of plain data that the report draws (grader/report/attention_figures.py).
"""
from __future__ import annotations

import torch

from grader.checks import CheckPlan, pick
from grader.sandbox import CallResult, RunResult


MAX_FIGURE_CELLS = 64 * 64


def _matrix(call: CallResult | None, path: tuple) -> list | None:
    """The small 2-D tensor a figure shows, as plain lists, or None."""
    if call is None or not call.ok:
        return None
    try:
        value = pick(call.value, path)
    except (KeyError, IndexError, TypeError):
        return None
    if type(value) is not torch.Tensor or value.dim() != 2 or value.numel() > MAX_FIGURE_CELLS:
        return None
    return value.detach().to(torch.float64).tolist()


def run_figures(plan: CheckPlan, run: RunResult, expected: RunResult) -> dict:
    """Figures of the submission's run next to the reference's: public inputs only."""
    figures = {}
    for name, (figure, index) in plan.figures.items():
        mine = _matrix(run.calls[index] if index < len(run.calls) else None, figure.path)
        theirs = _matrix(expected.calls[index], figure.path)
        if theirs is not None:
            figures[name] = {"title": figure.title.model_dump(), "student": mine, "expected": theirs}
            if figure.axes is not None:  # the instructor's labels, never the student's
                figures[name]["axes"] = [list(figure.axes[0]), list(figure.axes[1])]
    return figures
