"""Late policy and lateness, shared by exams (grader/exams/timing.py) and
homework assignments (grader/run/deadlines.py): one model, one rule.

Only the deadline differs: an exam's is its start plus the time limit; an
assignment's is its ``due`` time, moved by an extension. Given a submission
time from a record that means it and a deadline, :func:`judge_lateness`
says how late it is and what the policy makes of it; without either,
lateness is *unknown*: the score is not multiplied, and the note says why.
It is never taken for "on time", and never invented.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone, tzinfo
from typing import Literal

from pydantic import Field

from grader.course.schema_base import _Strict

# Times outside these years are no submission time (2**40 seconds is the year 36812).
EARLIEST, LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)
UNKNOWN_NOTE = "lateness unknown"


class LatePolicy(_Strict):
    """What a submission after the deadline (plus ``grace_min``) gets:
    ``accept`` (flagged only), ``penalty`` (the score times
    ``1 - penalty_per_min * minutes late``, at least 0) or ``zero``.
    Later than ``max_late_min``: zero, whatever the action."""

    action: Literal["accept", "penalty", "zero"] = "penalty"
    grace_min: float = Field(0.0, ge=0)
    penalty_per_min: float = Field(0.0, ge=0, le=1)
    max_late_min: float | None = Field(None, ge=0)


class TimeUnusable(ValueError):
    """A recorded time cannot be used; the message is a fixed text (never the record's)."""


@dataclass(frozen=True)
class Lateness:
    submitted_at: str | None
    deadline: str | None
    source: str                      # where the submission time came from (see the callers)
    late_min: float                  # 0 when on time
    flagged: bool                    # late at all (even within the grace period)
    factor: float                    # what the score is multiplied by
    note: str
    known: bool = True               # False: no usable submission time or deadline; see the note

    def to_dict(self) -> dict:
        return asdict(self)


def in_range(value: datetime) -> datetime:
    """``value`` if it is a plausible submission time, else TimeUnusable."""
    try:
        if EARLIEST <= value <= LATEST:
            return value
    except (OverflowError, ValueError):   # a time zone offset that pushes it past year 1 or 9999
        pass
    raise TimeUnusable(f"a time outside {EARLIEST.year}-{LATEST.year}")


def parse_time(text: str, zone: tzinfo | None) -> datetime:
    """An ISO 8601 time; one without a timezone is read in ``zone`` (UTC if None)."""
    value = datetime.fromisoformat(str(text).strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone or timezone.utc)
    return in_range(value)


def parse_nbgrader_timestamp(text: str, zone: tzinfo | None) -> datetime:
    """nbgrader's default format (``Exchange.timestamp_format``, time zone
    UTC), ``2026-04-20 02:55:01.123456 UTC``, or any ISO 8601 time."""
    head, _, name = text.strip().rpartition(" ")
    if head and name.upper() in ("UTC", "GMT"):
        return in_range(datetime.fromisoformat(head).replace(tzinfo=timezone.utc))
    return parse_time(text, zone)


def late_factor(policy: LatePolicy, late_min: float) -> tuple[float, str]:
    """(score factor, why) for a submission ``late_min`` minutes after the deadline."""
    if late_min <= 0:
        return 1.0, "on time"
    if late_min <= policy.grace_min:
        return 1.0, f"{late_min:.1f} min late, within the {policy.grace_min:g} min grace period"
    if policy.max_late_min is not None and late_min > policy.max_late_min:
        return 0.0, f"{late_min:.1f} min late, more than {policy.max_late_min:g} min: zero"
    if policy.action == "accept":
        return 1.0, f"{late_min:.1f} min late (accepted)"
    if policy.action == "zero":
        return 0.0, f"{late_min:.1f} min late: zero"
    charged = late_min - policy.grace_min
    factor = max(0.0, 1.0 - policy.penalty_per_min * charged)
    return factor, f"{late_min:.1f} min late: -{100 * (1 - factor):.0f}% ({policy.penalty_per_min:g} per minute after the grace period)"


def judge_lateness(submitted_at: datetime | None, due: datetime | None, policy: LatePolicy, source: str, *,
                   no_deadline: str = "no deadline", caution: str = "") -> Lateness:
    """Lateness of one submission under ``policy``; unknown (factor 1,
    ``known`` False) without a submission time or a deadline. ``caution`` is
    added to the note of a late submission whose time the student controls."""
    late_min = None
    if submitted_at is not None and due is not None:
        try:
            late_min = max(0.0, (submitted_at - due).total_seconds() / 60)
        except (OverflowError, ValueError):
            late_min = None
    if late_min is None:
        why = "no usable submission time on record" if submitted_at is None else no_deadline
        return Lateness(_iso(submitted_at), _iso(due), source, 0.0, False, 1.0, f"{UNKNOWN_NOTE}: {why}", known=False)
    factor, note = late_factor(policy, late_min)
    if caution and late_min > 0:
        note += f" ({caution})"
    return Lateness(_iso(submitted_at), _iso(due), source, round(late_min, 2), late_min > 0, factor, note)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
