"""What a student's page says about one exercise, from its recorded
verdicts: the one cause that broke the run (once), the mistakes the
variants confirm (first), at most two possible ones (marked), the failed
checks, and the checks that could not run (listed briefly).

Only fixed texts and ids reach this view: ``instructor_detail`` is read by
:func:`instructor_details` alone, for the class report.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from grader.gradebook import Record

# Failures that say nothing of their own: the exercise's cause explains them.
NOT_RUN_KINDS = ("not_run", "missing_name", "memory")
MAX_POSSIBLE = 2
DETAIL_SHOWN = 300
MAX_DETAIL_ROWS = 1000


@dataclass
class Mistake:
    pitfall_id: str
    checks: list[str]


@dataclass
class ExerciseFeedback:
    confirmed: list[Mistake] = field(default_factory=list)
    possible: list[Mistake] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)     # failed checks with something to say
    not_run: list[str] = field(default_factory=list)     # ids of checks that could not run
    quiet: bool = False  # not submitted / not started: the status says it all
    # check id -> [("confirmed" | "possibly", pitfall id)]: short references to the hints above
    tags: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


def _possible_ids(verdict: dict) -> list[str]:
    if "possible" in verdict:
        return verdict["possible"]
    # A record from before "possible" existed: every unconfirmed hint was a guess.
    return [p for p in verdict["pitfalls"] if p not in verdict.get("confirmed", [])]


def exercise_feedback(record: Record, hints: dict) -> ExerciseFeedback:
    """The feedback view of one result (``hints``: pitfall id -> Text)."""
    view = ExerciseFeedback(quiet=record.status in ("not_submitted", "not_started", "unreadable"))
    if view.quiet:
        return view
    confirmed: dict[str, list[str]] = {}
    possible: dict[str, list[str]] = {}
    for verdict in record.verdicts:
        if verdict["passed"]:
            continue
        if verdict.get("kind") in NOT_RUN_KINDS:
            view.not_run.append(verdict["check_id"])
            continue
        view.failed.append(verdict)
        for pitfall_id in verdict.get("confirmed", []):
            if pitfall_id in hints:
                confirmed.setdefault(pitfall_id, []).append(verdict["check_id"])
        for pitfall_id in _possible_ids(verdict):
            if pitfall_id in hints:
                possible.setdefault(pitfall_id, []).append(verdict["check_id"])
    view.confirmed = [Mistake(p, checks) for p, checks in confirmed.items()]
    # A pitfall confirmed anywhere is not also "possible"; the rest by how many checks point to it.
    ranked = Counter({p: len(checks) for p, checks in possible.items() if p not in confirmed})
    view.possible = [Mistake(p, possible[p]) for p, _ in ranked.most_common(MAX_POSSIBLE)]
    shown = {m.pitfall_id for m in view.possible} | set(confirmed)
    for verdict in view.failed:
        tags = [("confirmed", p) for p in verdict.get("confirmed", []) if p in confirmed]
        tags += [("possibly", p) for p in _possible_ids(verdict) if p in shown]
        view.tags[verdict["check_id"]] = tags
    return view


def _visible(text: str) -> str:
    """Control characters shown as escapes, never interpreted."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)[:DETAIL_SHOWN]


def instructor_details(records: list[Record]) -> list[tuple[str, str, str, str]]:
    """(student, exercise, checks, raw error) for the class report only: the
    errors students' code raised, bounded, control characters made visible.
    Never on a student's page."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for record in records:
        for verdict in record.verdicts:
            if verdict.get("instructor_detail"):
                key = (record.key.student, record.key.exercise, _visible(verdict["instructor_detail"]))
                grouped.setdefault(key, []).append(verdict["check_id"])
    rows = [(student, exercise, ", ".join(checks), detail) for (student, exercise, detail), checks in grouped.items()]
    return rows[:MAX_DETAIL_ROWS]


def to_review(records: list[Record]) -> list[tuple[str, str, str, str]]:
    """(student, exercise, check, reason) of every check that *could not
    tell* (a measured figure too near its threshold: grader/checks/work.py):
    no points for now, for the instructor to settle (``grader adjust``)."""
    return [(record.key.student, record.key.exercise, verdict["check_id"], verdict.get("reason", ""))
            for record in records for verdict in record.verdicts if verdict.get("kind") == "could not tell"]

