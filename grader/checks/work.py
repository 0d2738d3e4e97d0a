"""Work measured from outside: a check that a call does far less work than
recomputing, judged on the CPU time the sandbox reads for the child from
``/proc`` (``CallResult.cpu_s``), never on anything the child reports.

The yardsticks come from the reference's run of the same calls: what the
reference's call costs (``cheap``), and what recomputing costs (``full``:
a yardstick call's cost times how many of them a recomputation makes). The
threshold is their geometric middle, and a figure within 2x of it decides
nothing: the check then *could not tell*, scores no points for now and goes
to the instructor's review list. A reference whose own two costs are not
far apart (8x) on this machine cannot tell either. So a loaded machine, or
a second thread's spinning, can delay a verdict, never flip it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from grader.checks import CouldNotTell, RunRule
from grader.course import Text
from grader.sandbox import ProbeCall, RunResult

MARGIN = 2.0          # no verdict on a figure within this factor of the threshold
MIN_SPREAD = 8.0      # the reference's recomputation must cost this many times its cheap call


@dataclass(frozen=True)
class Cost:
    """One measured call: the probe whose call is timed, the yardstick
    probe (one unit of recomputation) and how many units a recomputation of
    the measured call makes, and what a student reads when it recomputed.
    Each probe names the first call of it in the plan: give a timed call a
    probe of its own."""

    probe: str
    yardstick: str
    units: float
    reason: Text


def _cpu(run: RunResult, inputs: Sequence[ProbeCall], probe: str) -> float | None:
    index = next((i for i, call in enumerate(inputs) if call.probe == probe), None)
    if index is None or index >= len(run.calls):
        return None
    return run.calls[index].cpu_s


def verdict(spent: float | None, cheap: float | None, full: float | None) -> str:
    """"pass", "fail" or "could not tell" for a call that cost ``spent``
    where the reference's costs ``cheap`` and recomputing costs ``full``."""
    if spent is None or not cheap or not full or full < MIN_SPREAD * cheap:
        return "could not tell"
    threshold = math.sqrt(cheap * full)
    if spent <= threshold / MARGIN:
        return "pass"
    return "fail" if spent >= threshold * MARGIN else "could not tell"


def _words(text: Text) -> str:
    return f"{text.en} / {text.zh}"


def cheaper_than_recomputing(costs: Sequence[Cost], could_not_tell: Text) -> RunRule:
    """A run rule: every measured call costs far less than recomputing (the
    first that does not names its reason), else could not tell."""

    def rule(inputs: Sequence[ProbeCall], run: RunResult, expected: RunResult) -> str | None:
        undecided = False
        for cost in costs:
            unit = _cpu(expected, inputs, cost.yardstick)
            outcome = verdict(_cpu(run, inputs, cost.probe), _cpu(expected, inputs, cost.probe),
                              None if unit is None else unit * cost.units)
            if outcome == "fail":
                return _words(cost.reason)
            undecided |= outcome == "could not tell"
        return CouldNotTell(_words(could_not_tell)) if undecided else None

    return rule
