"""The reference's and the pitfall variants' results, per set of hidden inputs.

A submission is judged on its own hidden inputs (grader/checks/inputs.py),
so the reference runs on them too. Each input set (an exercise and its
seed) is an :class:`InputSet`: its plan, the reference's results (run when
the submission's are compared) and the variants' (run only when a check
fails with a mistake to explain). Runs on the fixed inputs (seed None:
exams, a judge without a grading secret, and every ``fixed_inputs`` check)
happen once per exercise and are kept; seeded sets are kept in a bounded
cache (:data:`KEPT_INPUT_SETS`), so a resubmission or a class's identical
stubs cost one reference run, and a long ``grader watch`` does not grow.

A seeded run makes only the calls that differ from the fixed plan's: the
calls of a ``fixed_inputs`` check (a copy task's training) and the
figures' own calls (public inputs) are taken from the fixed run, which
each call's result depends on alone.

In:  an exercise, a seed (or None), the sandbox and the reference/variant sources.
Out: :class:`InputSet`: the plan, ``expected()`` and ``variants()`` for it.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from grader.checks import Check, CheckPlan
from grader.failures import Failure, first_failure, measured_failure, same_signature
from grader.sandbox import CallResult, RunResult

# Pitfall variants run on one submission's own inputs besides those its failing
# checks declare, at most (the class's cost: bench/hidden_inputs_cost.py).
MAX_SEEDED_VARIANTS = 2

# Seeded input sets kept per judge (the fixed ones are always kept): enough
# for every submission in flight and a few resubmissions of the same bytes.
KEPT_INPUT_SETS = 64

# run(calls, sandbox batches): one source (the reference or a variant) on these calls
Runner = Callable[[list, list[int]], RunResult]


@dataclass
class InputSet:
    """One exercise's hidden inputs (``seed`` None: each check's own) with
    the reference's and the variants' results on them, each run once."""

    exercise_id: str
    seed: int | None
    plan: CheckPlan
    _results: dict[str, object] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # (check id, pitfall id) -> the variant's failure on this set (None: it passes)
    _variant_failures: dict[tuple[str, str], Failure | None] = field(default_factory=dict)
    _granted: set[str] = field(default_factory=set)   # variants this (seeded) set may run
    _others: int = 0

    def once(self, name: str, compute: Callable[[], object]) -> object:
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._results:
                self._results[name] = compute()
            return self._results[name]

    def variant_failure(self, check: Check, pitfall_id: str, variant: RunResult, expected: RunResult) -> Failure | None:
        """How the variant fails this check (once per check and variant: it
        was recompared on every failing submission)."""
        key = (check.id, pitfall_id)
        if key not in self._variant_failures:   # a race computes the same value twice
            self._variant_failures[key] = first_failure(check, self.plan.slices[check.id], variant, expected) \
                or measured_failure(check, self.plan.calls, variant, expected)
        return self._variant_failures[key]

    def budgeted(self, names: list[str], declared: tuple[str, ...]) -> list[str]:
        """``names`` that this set may run: on a submission's inputs, those the
        failing check declares, and at most :data:`MAX_SEEDED_VARIANTS` others in all."""
        if self.seed is None:
            return names
        with self._lock:
            for name in names:
                if name not in self._granted and (name in declared or self._others < MAX_SEEDED_VARIANTS):
                    self._granted.add(name)
                    self._others += name not in declared
            return [n for n in names if n in self._granted]

    def alike(self, check: Check, kind: str, variants: dict[str, RunResult], expected: RunResult) -> list[str]:
        """The variants (run on this set) that fail ``check`` with the
        signature ``kind``: on fixed inputs, the only ones worth running on a
        submission's own to explain its failure (a confirmed pitfall fails
        alike, a possible one with the same signature)."""
        return [p for p, v in variants.items()
                if (theirs := self.variant_failure(check, p, v, expected)) and same_signature(theirs.kind, kind)]


class InputSets:
    """The fixed input set of each exercise (kept) and the seeded ones (bounded)."""

    def __init__(self, capacity: int = KEPT_INPUT_SETS):
        self.capacity = capacity
        self._fixed: dict[str, InputSet] = {}
        self._seeded: OrderedDict[tuple[str, int], InputSet] = OrderedDict()
        self._lock = threading.Lock()
        # Runs made beyond the submissions' own: the cost bench/ reports. The reference's and
        # the variants' on seeded inputs, submissions' second runs on the fixed ones (grader/suspects.py),
        # and the measured checks made again, the submission's and the reference's (grader/remeasure.py).
        self.runs = {"reference": 0, "variants": 0, "submission": 0, "measured again": 0}

    def count(self, name: str) -> None:
        with self._lock:
            self.runs[name if name in self.runs else "variants"] += 1

    def get(self, exercise_id: str, seed: int | None, build: Callable[[], CheckPlan]) -> InputSet:
        with self._lock:
            if seed is None:
                found = self._fixed.get(exercise_id)
            else:
                found = self._seeded.get((exercise_id, seed))
                if found is not None:
                    self._seeded.move_to_end((exercise_id, seed))
            if found is not None:
                return found
        made = InputSet(exercise_id, seed, build())   # outside the lock: a plan draws tensors
        with self._lock:
            if seed is None:
                return self._fixed.setdefault(exercise_id, made)
            found = self._seeded.setdefault((exercise_id, seed), made)
            self._seeded.move_to_end((exercise_id, seed))
            while len(self._seeded) > self.capacity:
                # A set still in use by a thread stays valid for it: only this index forgets it.
                self._seeded.popitem(last=False)
            return found


def check_batches(plan: CheckPlan, ordered: list[int] | None = None) -> list[int]:
    """How many calls the sandbox sends at once, for the calls ``ordered``
    (default: all of them, in order): each check's consecutive calls together
    (one round trip per check, not per call), and each call that belongs to
    no check (a figure's) or to a measured check on its own (the CPU time the
    sandbox measures from outside then covers that call alone)."""
    ordered = list(range(len(plan.calls))) if ordered is None else ordered
    measured = {check.id for check in plan.checks if check.measured}
    owner = {i: check_id for check_id, calls in plan.slices.items() if check_id not in measured
             for i in range(calls.start, calls.stop)}
    sizes: list[int] = []
    for position, index in enumerate(ordered):
        previous = ordered[position - 1] if position else None
        if previous is not None and owner.get(index) is not None and owner.get(index) == owner.get(previous) \
                and index == previous + 1:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes


# Draws tried for one submission before the reference's failing its own
# checks is taken for what it is, a broken reference (the class stops).
REDRAWS = 3


def passing_seed(seed: int | None, reference: Callable[[int | None], object], broken: type[Exception]) -> int | None:
    """``seed``, or the first redraw from it on whose inputs ``reference(seed)``
    does not raise ``broken``: a student could otherwise search their bytes
    for a draw where the reference fails, and stop the class with it. A
    pure function of ``seed``, so a regrade redraws alike."""
    for attempt in range(REDRAWS):
        try:
            reference(seed)
            return seed
        except broken:
            if seed is None or attempt == REDRAWS - 1:
                raise
            seed = int.from_bytes(hashlib.sha256(f"redraw\0{seed}".encode()).digest()[:8], "big") >> 2
    return seed


def seeded_indexes(seeded: CheckPlan) -> list[int]:
    """The calls of ``seeded`` whose inputs are the submission's own: every
    call of every check without ``fixed_inputs`` (in plan order)."""
    return [i for check in seeded.checks if not check.fixed_inputs
            for i in range(seeded.slices[check.id].start, seeded.slices[check.id].stop)]


def run_seeded(seeded: CheckPlan, fixed: CheckPlan, fixed_run: Callable[[], RunResult], run: Runner) -> RunResult:
    """``run`` on the calls of ``seeded`` that differ from ``fixed``'s, the
    rest taken from ``fixed_run()`` (asked only when some call is fixed):
    one run's result for every call of ``seeded``."""
    ordered = sorted(seeded_indexes(seeded))   # plan order: run rules' checks come last
    part = run([seeded.calls[i] for i in ordered], check_batches(seeded, ordered))
    calls: list[CallResult | None] = [None] * len(seeded.calls)
    for index, result in zip(ordered, part.calls):
        calls[index] = result
    if len(ordered) < len(calls):
        _take_fixed(calls, seeded, fixed, fixed_run())
    # A run that ended early (or a fixed run that did) is as long as its first missing call.
    end = next((i for i, call in enumerate(calls) if call is None), len(calls))
    return replace(part, calls=calls[:end])


def _take_fixed(calls: list, seeded: CheckPlan, fixed: CheckPlan, fixed_run: RunResult) -> None:
    def take(mine: int, theirs: int) -> None:
        calls[mine] = fixed_run.calls[theirs] if theirs < len(fixed_run.calls) else None

    for check in seeded.checks:
        if check.fixed_inputs:
            mine, theirs = seeded.slices[check.id], fixed.slices[check.id]
            for offset in range(mine.stop - mine.start):
                take(mine.start + offset, theirs.start + offset)
    for name, (_, index) in seeded.figures.items():
        if calls[index] is None:   # a figure's own call (public inputs)
            take(index, fixed.figures[name][1])


def run_all(named: dict[str, Callable[[], RunResult]]) -> dict[str, RunResult]:
    """Each named run at once (every thread whose submission fails waits for them)."""
    if not named:
        return {}
    with ThreadPoolExecutor(max_workers=len(named)) as pool:
        futures = {name: pool.submit(compute) for name, compute in named.items()}
        return {name: future.result() for name, future in futures.items()}
