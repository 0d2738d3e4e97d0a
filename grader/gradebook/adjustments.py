"""The instructor's manual adjustments of a result (``grader adjust``).

An adjustment is a decision about one student's exercise (or exam), kept in
the gradebook's ``adjustments`` table with who made it, when and why. It is
never an edit of the result: the judge's score stays as graded, every
adjustment stays in the history, and the newest one for a (student,
exercise) is the one in effect:

- ``points``: the score becomes this many points;
- ``delta``: this many points are added to the current score: the judge's,
  or the one that the adjustments before it in effect made (``= 9.5`` then
  ``+0.3`` gives 9.8; negative to take off);
- ``clear``: no adjustment (the judge's score stands again).

The adjustments in effect for a (student, exercise) are a chain: the newest
``points`` (or none) and every ``delta`` after it; a ``clear`` ends the
chain. Each step is kept within 0..max points, so the score a step is added
to is the one the instructor saw.

Adjustments are keyed by student and exercise only, not by submission or
course version, so they survive regrades (``grader grade --force``), resumed
runs and a changed submission; the history says what each was made against.
The adjusted score is kept within 0..max points. A late penalty (homework
deadlines) applies after the adjustment: an adjustment is about merit; to
excuse lateness, give an extension.
"""
from __future__ import annotations

import dataclasses
import getpass
import os
from dataclasses import dataclass
from datetime import datetime, timezone

from grader.gradebook.records import Record

KINDS = ("points", "delta", "clear")


@dataclass(frozen=True)
class Adjustment:
    student: str
    exercise: str
    kind: str               # points | delta | clear
    value: float
    reason: str
    made_by: str
    made_at: float          # seconds since the epoch
    course_version: str     # what it was made against (for the history)
    content_hash: str
    id: int = 0

    def change(self) -> str:
        """``= 7``, ``+2``, ``-1.5`` or ``cleared``."""
        if self.kind == "clear":
            return "cleared"
        if self.kind == "points":
            return f"= {self.value:g}"
        return f"{self.value:+g}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": self.value, "change": self.change(), "reason": self.reason,
                "by": self.made_by, "at": when(self.made_at)}


def when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")


def current_user() -> str:
    """Who is adjusting: the OS user (``--by`` overrides it)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):         # no passwd entry (a container's uid)
        return os.environ.get("USER") or f"uid {os.getuid()}"


def in_effect(adjustments: list[Adjustment]) -> dict[tuple[str, str], list[Adjustment]]:
    """The chain of adjustments in effect for each (student, exercise), oldest
    first: the newest ``points`` (if any) and the deltas after it; a
    ``clear`` ends a chain."""
    chains: dict[tuple[str, str], list[Adjustment]] = {}
    for adjustment in sorted(adjustments, key=lambda a: (a.made_at, a.id)):
        key = (adjustment.student, adjustment.exercise)
        if adjustment.kind == "clear":
            chains.pop(key, None)
        elif adjustment.kind == "points":
            chains[key] = [adjustment]
        else:
            chains.setdefault(key, []).append(adjustment)
    return chains


def adjusted_points(points: float, max_points: float, chain: list[Adjustment]) -> float:
    """The judge's ``points`` after each step of ``chain``, each kept within 0..max."""
    for adjustment in chain:
        value = adjustment.value if adjustment.kind == "points" else points + adjustment.value
        points = min(max(value, 0.0), max_points)
    return points


def chain_dict(chain: list[Adjustment]) -> dict:
    """What a page and an export say of a chain: the newest step's who, when
    and why, the whole change (``= 9.5 +0.3``) and every step."""
    newest = chain[-1]
    return {**newest.to_dict(), "change": " ".join(a.change() for a in chain),
            "steps": [a.to_dict() for a in chain]}


def apply_adjustments(records: list[Record], adjustments: list[Adjustment]) -> list[Record]:
    """``records`` with the adjustments in effect applied to each: ``points``
    adjusted, ``graded_points`` the judge's score, ``adjustment`` what was done."""
    effective = in_effect(adjustments)
    out = []
    for record in records:
        chain = effective.get((record.key.student, record.key.exercise))
        if not chain:
            out.append(record)
            continue
        out.append(dataclasses.replace(record, points=adjusted_points(record.points, record.max_points, chain),
                                       graded_points=record.points, adjustment=chain_dict(chain)))
    return out


class AdjustmentRefused(ValueError):
    """The adjustment asked for cannot be made; the message names the option."""


def make_adjustment(book, course, student: str, exercise: str, *, points: float | None, delta: float | None,
                    clear: bool, reason: str, made_by: str) -> tuple[Adjustment, Record]:
    """Check and record one adjustment; returns it with the result as now adjusted."""
    chosen = [name for name, given in (("--points", points is not None), ("--delta", delta is not None),
                                       ("--clear", clear)) if given]
    if len(chosen) != 1:
        raise AdjustmentRefused(f"give exactly one of --points, --delta, --clear (got {', '.join(chosen) or 'none'})")
    if not reason.strip():
        raise AdjustmentRefused("--reason: say why (it is kept in the gradebook and shown in the exports)")
    known = [e.id for e in course.exercises] + [x.id for x in course.exams]
    if exercise not in known:
        raise AdjustmentRefused(f"EXERCISE: no {exercise!r} in course.yaml; choose from {', '.join(known)}")
    version = course.course.version
    current = [r for r in book.records(version, adjusted=False)
               if r.key.student == student and r.key.exercise == exercise]
    if not current:
        raise AdjustmentRefused(f"STUDENT: no result of {student!r} for {exercise} in {book.path} "
                                f"(course version {version}); grade it first")
    record = current[0]
    kind, value = ("points", points) if points is not None else ("delta", delta) if delta is not None else ("clear", 0.0)
    if kind == "points" and not 0 <= value <= record.max_points:
        raise AdjustmentRefused(f"--points: {value:g} is outside 0..{record.max_points:g}")
    if kind != "clear" and value != value:     # NaN
        raise AdjustmentRefused(f"--{kind}: not a number")
    book.adjust(student, exercise, kind=kind, value=float(value), reason=reason.strip(), made_by=made_by,
                course_version=version, content_hash=record.key.content_hash)
    now = [r for r in book.records(version) if r.key == record.key]
    return book.adjustments(student)[-1], now[0]


def history_lines(book, student: str | None = None) -> list[str]:
    """The adjustments and regrades, oldest first, one line each; the
    adjustment in effect for each (student, exercise) is marked."""
    adjustments = book.adjustments(student)
    effective = {a.id for chain in in_effect(adjustments).values() for a in chain}
    events = [(a.made_at, f"{when(a.made_at)}  {a.student} {a.exercise}  adjusted {a.change():<8} by {a.made_by}: "
                          f"{a.reason}" + ("   [in effect]" if a.id in effective else "")) for a in adjustments]
    for record, at in book.superseded(student):
        events.append((at, f"{when(at)}  {record.key.student} {record.key.exercise}  regraded: the result of "
                           f"{when(record.graded_at)} ({record.points:g}/{record.max_points:g}, "
                           f"submission {record.key.content_hash[:10]}) was superseded"))
    return [line for _, line in sorted(events, key=lambda e: e[0])]
