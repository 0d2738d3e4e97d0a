"""What the gradebook holds about one result: its :class:`Key` and its
:class:`Record`, and the late factor applied to records as they are read.

Plain data, below everything else in the gradebook: the store
(grader/gradebook/store.py), the adjustments (grader/gradebook/adjustments.py)
and the lateness assessment (grader/run/deadlines.py) all build on it.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Key:
    student: str
    exercise: str
    content_hash: str
    course_version: str


@dataclass(frozen=True)
class Record:
    key: Key
    points: float
    max_points: float
    status: str
    reason: str
    verdicts: list[dict]
    graded_at: float
    figures: dict = field(default_factory=dict)
    # Set when read for reports (Gradebook.records, grader/gradebook/adjustments.py):
    # the judge's score before the instructor's adjustment, and that adjustment.
    graded_points: float | None = None
    adjustment: dict | None = None
    # ... and the homework late policy's verdict (grader/run/deadlines.py assesses it), with the points before it.
    lateness: dict | None = None


def record_from_row(row: tuple) -> Record:
    """A row of ``results`` (or the first 11 columns of ``superseded_results``) as a Record."""
    return Record(Key(*row[:4]), row[4], row[5], row[6], row[7], json.loads(row[8]), row[9], json.loads(row[10]))


def apply_lateness(records: list[Record], lateness: dict[Key, dict]) -> list[Record]:
    """``records`` with the late factor applied to ``points`` (after any
    adjustment), ``lateness`` holding the assessment and the points before it."""
    out = []
    for record in records:
        late = lateness.get(record.key)
        if late is None:
            out.append(record)
            continue
        out.append(dataclasses.replace(record, points=record.points * late["factor"],
                                       lateness={**late, "unpenalised_points": record.points}))
    return out
