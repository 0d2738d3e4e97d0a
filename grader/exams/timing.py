"""When was an exam submitted, was it late, and what does the late policy make of it.

Where the submission time comes from, most trusted first (the verdict records
which one was used, so the instructor knows how far to trust it):

1. ``manifest``: a CSV given to ``grader exam grade --timestamps`` with
   columns ``student_id``, ``submitted_at`` and optionally ``started_at``,
   as exported by the system that collected the exams (LMS, upload server).
2. ``metadata``: ``.submission.json`` in the student's submission folder,
   ``{"submitted_at": "...", "started_at": "..."}``, written by the collection
   tool (not by the student: it is the collector's job to overwrite it).
3. ``nbgrader``: ``timestamp.txt`` in nbgrader's collected assignment folder
   (``submitted/<student>/<exam>-<student>/``), written by ``nbgrader submit``:
   the time nbgrader itself judges lateness by.
4. ``mtime``: the newest modification time of the student's files (a folder)
   or of the archive (a zip). Easy to disturb by copying without ``-p``:
   a fallback, flagged as such.

Times are ISO 8601; a time without a timezone is read in the timezone of the
exam's ``starts_at`` (UTC if it has none). The deadline is the start (the
student's ``started_at`` when given, else the exam's ``starts_at``) plus the
time limit plus the roster's ``extra_time_min``.
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.course import Exam, LatePolicy

METADATA_FILE = ".submission.json"
NBGRADER_TIMESTAMP = "timestamp.txt"


@dataclass(frozen=True)
class Stamp:
    submitted_at: datetime | None
    started_at: datetime | None
    source: str                      # manifest | metadata | nbgrader | mtime | none


@dataclass(frozen=True)
class Lateness:
    submitted_at: str | None
    deadline: str | None
    source: str
    late_min: float                  # 0 when on time
    flagged: bool                    # late at all (even within the grace period)
    factor: float                    # what the exam score is multiplied by
    note: str

    def to_dict(self) -> dict:
        return asdict(self)


def parse_time(text: str, exam: Exam) -> datetime:
    value = datetime.fromisoformat(str(text).strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=exam.starts_at.tzinfo if exam.starts_at else timezone.utc)
    return value


def read_manifest(path: Path, exam: Exam) -> dict[str, Stamp]:
    """``student_id,submitted_at[,started_at]`` rows -> stamps by student."""
    stamps = {}
    with open(path, newline="", encoding="utf-8-sig") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            student = (row.get("student_id") or row.get("student") or row.get("id") or "").strip()
            try:
                submitted = parse_time(row["submitted_at"], exam) if row.get("submitted_at") else None
                started = parse_time(row["started_at"], exam) if row.get("started_at") else None
            except ValueError as exc:
                raise ValueError(f"{path}, line {line}: {exc}") from exc
            if student:
                stamps[student] = Stamp(submitted, started, "manifest")
    return stamps


def parse_nbgrader_timestamp(text: str, exam: Exam) -> datetime:
    """nbgrader's default format (``Exchange.timestamp_format``, time zone
    UTC), ``2026-04-20 02:55:01.123456 UTC``, or any ISO 8601 time."""
    head, _, zone = text.strip().rpartition(" ")
    if head and zone.upper() in ("UTC", "GMT"):
        return datetime.fromisoformat(head).replace(tzinfo=timezone.utc)
    return parse_time(text, exam)


def _newest_mtime(entry: Path) -> float | None:
    if entry.is_file():
        return entry.stat().st_mtime
    times = [p.stat().st_mtime for p in entry.rglob("*")
             if p.is_file() and not p.is_symlink() and p.name != METADATA_FILE and "__pycache__" not in p.parts]
    return max(times) if times else None


def find_stamp(entry: Path, student: str, exam: Exam, manifest: dict[str, Stamp] | None = None, *,
               nbgrader_folder: Path | None = None) -> tuple[Stamp, str]:
    """(the submission's time, a problem worth reporting or ""); ``nbgrader_folder``:
    the student's assignment in nbgrader's collected layout."""
    if manifest and student in manifest:
        return manifest[student], ""
    problem = ""
    metadata = entry / METADATA_FILE
    if entry.is_dir() and metadata.is_file() and not metadata.is_symlink():
        try:
            data = json.loads(metadata.read_text(encoding="utf-8"))
            submitted = parse_time(data["submitted_at"], exam)
            started = parse_time(data["started_at"], exam) if data.get("started_at") else None
            return Stamp(submitted, started, "metadata"), ""
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"{METADATA_FILE} unusable ({type(exc).__name__}: {exc}); using file times"
    stamp_file = nbgrader_folder / NBGRADER_TIMESTAMP if nbgrader_folder is not None else None
    if not problem and stamp_file is not None and stamp_file.is_file() and not stamp_file.is_symlink():
        try:
            return Stamp(parse_nbgrader_timestamp(stamp_file.read_text(encoding="utf-8"), exam), None, "nbgrader"), ""
        except (ValueError, UnicodeDecodeError) as exc:
            problem = f"nbgrader's {NBGRADER_TIMESTAMP} unusable ({type(exc).__name__}: {exc}); using file times"
    mtime = _newest_mtime(entry)
    if mtime is None:
        return Stamp(None, None, "none"), problem
    return Stamp(datetime.fromtimestamp(mtime, tz=timezone.utc), None, "mtime"), problem


def deadline(exam: Exam, stamp: Stamp, extra_min: float = 0.0) -> datetime | None:
    start = stamp.started_at or exam.starts_at
    if start is None:
        return None
    return start + timedelta(minutes=exam.time_limit_min + extra_min)


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


def assess(exam: Exam, stamp: Stamp, extra_min: float = 0.0) -> Lateness:
    """Lateness of one submission under the exam's policy."""
    due = deadline(exam, stamp, extra_min)
    if stamp.submitted_at is None or due is None:
        why = "no submission time" if stamp.submitted_at is None else "the exam has no start time"
        return Lateness(_iso(stamp.submitted_at), _iso(due), stamp.source, 0.0, False, 1.0,
                        f"lateness not assessed: {why}")
    late_min = max(0.0, (stamp.submitted_at - due).total_seconds() / 60)
    factor, note = late_factor(exam.late_policy, late_min)
    if stamp.source == "mtime" and late_min > 0:
        note += " (from file times: check them)"
    return Lateness(_iso(stamp.submitted_at), _iso(due), stamp.source, round(late_min, 2), late_min > 0, factor, note)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
