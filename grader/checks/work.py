"""Work measured from outside: a check that a call does far less work than
recomputing, judged on the CPU time the sandbox reads for the child from
``/proc`` (``CallResult.cpu_s``), never on anything the child reports.

The yardsticks come from the reference's run of the same calls: what the
reference's call costs (``cheap``), and what recomputing costs (``full``:
one unit of recomputation times how many of them a recomputation makes).
The unit is the difference between two calls of the yardstick probe that
make 1 and 1 + ``more`` units (:func:`yardstick_calls`): what every call
pays once (building the model, the call's own traffic) would otherwise be
counted once per unit, and a recomputation would look cheaper than it is
next to its yardstick. The
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
    probe (its two calls from :func:`yardstick_calls` give one unit of
    recomputation) and how many units a recomputation of
    the measured call makes, and what a student reads when it recomputed.
    Each probe names the first call of it in the plan: give a timed call a
    probe of its own."""

    probe: str
    yardstick: str
    units: float
    reason: Text


def yardstick_calls(probe: str, kwargs: dict, more: int = 2) -> list[ProbeCall]:
    """The calls of a yardstick ``probe`` (which takes ``repeats``) that
    :func:`_unit` reads: its module's ``cost_model``, which builds the model
    ahead (coursekit/probes/kept.py), then one unit of recomputation, then
    1 + ``more``: building the model is no part of the work measured, and
    its cost varies from call to call."""
    return [*built_ahead(probe, {**kwargs, "repeats": 1}), ProbeCall(probe, {**kwargs, "repeats": 1 + more})]


def built_ahead(probe: str, kwargs: dict) -> list[ProbeCall]:
    """A timed call of ``probe`` whose model its module's ``cost_model``
    builds first, outside its timing (as :func:`yardstick_calls`)."""
    build = probe.rsplit(":", 1)[0] + ":cost_model"
    return [ProbeCall(build, {"config": kwargs["config"], "seed": kwargs["seed"]}), ProbeCall(probe, kwargs)]


def _cpu(run: RunResult, inputs: Sequence[ProbeCall], probe: str) -> float | None:
    index = next((i for i, call in enumerate(inputs) if call.probe == probe), None)
    if index is None or index >= len(run.calls):
        return None
    return run.calls[index].cpu_s


def _unit(run: RunResult, inputs: Sequence[ProbeCall], probe: str) -> float | None:
    """One unit of recomputation: the difference in CPU time between the
    first two calls of ``probe`` (:func:`yardstick_calls`), per unit of
    ``repeats`` between them; None without both figures."""
    found = [(call.kwargs.get("repeats", 1), run.calls[i].cpu_s)
             for i, call in enumerate(inputs) if call.probe == probe and i < len(run.calls)][:2]
    if len(found) < 2 or any(cpu is None for _, cpu in found):
        return None
    (fewer, first), (more, second) = found
    return (second - first) / (more - fewer) if more > fewer and second > first else None


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


def _figures(probe: str, spent: float | None, cheap: float | None, full: float | None) -> str:
    """What the instructor reviews an undecided call by."""
    def seconds(x: float | None) -> str:
        return "?" if x is None else f"{x:.3f} s"

    middle = f"; undecided between {seconds(math.sqrt(cheap * full) / MARGIN)} and " \
             f"{seconds(math.sqrt(cheap * full) * MARGIN)}" if cheap and full else ""
    return (f"{probe.rsplit(':', 1)[-1]}: spent {seconds(spent)} of CPU; the reference {seconds(cheap)}, "
            f"recomputing {seconds(full)}{middle}")


def cheaper_than_recomputing(costs: Sequence[Cost], could_not_tell: Text) -> RunRule:
    """A run rule: every measured call costs far less than recomputing (the
    first that does not names its reason), else could not tell."""

    def rule(inputs: Sequence[ProbeCall], run: RunResult, expected: RunResult) -> str | None:
        undecided = []
        for cost in costs:
            unit = _unit(expected, inputs, cost.yardstick)
            figures = (_cpu(run, inputs, cost.probe), _cpu(expected, inputs, cost.probe),
                       None if unit is None else unit * cost.units)
            outcome = verdict(*figures)
            if outcome == "fail":
                return _words(cost.reason)
            if outcome == "could not tell":
                undecided.append(_figures(cost.probe, *figures))
        return CouldNotTell(_words(could_not_tell), "; ".join(undecided)) if undecided else None

    return rule
