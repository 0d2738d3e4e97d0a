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
   Only in a collected folder: a zip carrying it (an earlier folder's
   on-time stamp zipped with later answers, say) is timed as itself, by the
   manifest or its own file time, and the record is named as not used.
4. ``mtime``: the newest modification time of the student's files (a folder)
   or of the archive (a zip), only when the instructor asks for it
   (``grader exam grade --trust-file-times``): the student sets those times.

Without any of these, or when the one found cannot be read or is out of
range, lateness is **unknown**: shown as such in grades.csv, the report and
the command's summary, the score is not multiplied, and the instructor
decides. It is never taken for "on time".

Student-written files (``.submission.json``, ``timestamp.txt``) are read with
a byte cap, through no link and from regular files only; problems name the
file and the kind of fault, never its text.

Times are ISO 8601; a time without a timezone is read in the timezone of the
exam's ``starts_at`` (UTC if it has none). The deadline is the start (the
student's ``started_at`` when given, else the exam's ``starts_at``) plus the
time limit plus the roster's ``extra_time_min``.
"""
from __future__ import annotations

import csv
import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.course.exam_schema import Exam
from grader.exams.answers_file import read_bounded
# The policy and its rule are shared with homework deadlines; re-exported for the exam modules.
from grader.course.late_policy import (  # noqa: F401
    EARLIEST, LATEST, UNKNOWN_NOTE, LatePolicy, Lateness, TimeUnusable, in_range, judge_lateness, late_factor,
)
from grader.course.late_policy import parse_nbgrader_timestamp as _parse_nbgrader_timestamp
from grader.course.late_policy import parse_time as _parse_time

METADATA_FILE = ".submission.json"
NBGRADER_TIMESTAMP = "timestamp.txt"
MAX_METADATA_BYTES = 4096      # a few fields
MAX_TIMESTAMP_BYTES = 128      # "2026-04-20 02:55:01.123456 UTC" is 30
MAX_FILES_FOR_MTIME = 10_000


@dataclass(frozen=True)
class Stamp:
    submitted_at: datetime | None
    started_at: datetime | None
    source: str                      # manifest | metadata | nbgrader | mtime | none


def parse_time(text: str, exam: Exam) -> datetime:
    return _parse_time(text, exam.starts_at.tzinfo if exam.starts_at else None)


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
    return _parse_nbgrader_timestamp(text, exam.starts_at.tzinfo if exam.starts_at else None)


def _newest_mtime(entry: Path) -> float | None:
    """The newest modification time of the regular files in ``entry`` (a
    bounded walk that follows no link); of ``entry`` itself if a file."""
    info = os.lstat(entry)
    if stat.S_ISREG(info.st_mode):
        return info.st_mtime
    newest, seen = None, 0
    for folder, dirnames, filenames in os.walk(entry):      # os.walk follows no link by default
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            seen += 1
            if seen > MAX_FILES_FOR_MTIME:
                return newest
            file_info = os.lstat(os.path.join(folder, name))
            if name != METADATA_FILE and stat.S_ISREG(file_info.st_mode):
                newest = file_info.st_mtime if newest is None else max(newest, file_info.st_mtime)
    return newest


def _from_mtime(seconds: float) -> datetime:
    try:
        return in_range(datetime.fromtimestamp(seconds, tz=timezone.utc))
    except (OverflowError, OSError, ValueError) as exc:     # 2**40, NaN, beyond the platform's time_t
        raise TimeUnusable("a file time out of range") from exc


def _read_metadata(path: Path, exam: Exam) -> Stamp:
    data = read_bounded(path, MAX_METADATA_BYTES)
    if len(data) > MAX_METADATA_BYTES:
        raise TimeUnusable(f"larger than {MAX_METADATA_BYTES} bytes")
    try:
        record = json.loads(data.decode("utf-8"))
        submitted = parse_time(record["submitted_at"], exam)
        started = parse_time(record["started_at"], exam) if record.get("started_at") else None
    except TimeUnusable:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise TimeUnusable(f"not a record of the form {{\"submitted_at\": ISO time}} ({type(exc).__name__})") from exc
    return Stamp(submitted, started, "metadata")


def _read_nbgrader_timestamp(path: Path, exam: Exam) -> Stamp:
    data = read_bounded(path, MAX_TIMESTAMP_BYTES)
    if len(data) > MAX_TIMESTAMP_BYTES:
        raise TimeUnusable(f"larger than {MAX_TIMESTAMP_BYTES} bytes")
    try:
        return Stamp(parse_nbgrader_timestamp(data.decode("utf-8"), exam), None, "nbgrader")
    except TimeUnusable:
        raise
    except (ValueError, TypeError) as exc:                    # UnicodeDecodeError is a ValueError
        raise TimeUnusable(f"not a time nbgrader writes ({type(exc).__name__})") from exc


def _record(path: Path | None, read, exam: Exam) -> tuple[Stamp | None, str]:
    """(the stamp in the record at ``path``, or None; a problem or "")."""
    if path is None or not os.path.lexists(path):
        return None, ""
    try:
        return read(path, exam), ""
    except TimeUnusable as exc:
        return None, f"{path.name} unusable: {exc}; lateness unknown"
    except OSError as exc:
        why = "a link" if os.path.islink(path) else "not a regular file" if not path.is_file() else "unreadable"
        return None, f"{path.name} is {why} ({type(exc).__name__}); lateness unknown"


def find_stamp(entry: Path, student: str, exam: Exam, manifest: dict[str, Stamp] | None = None, *,
               nbgrader_folder: Path | None = None, trust_file_times: bool = False) -> tuple[Stamp, str]:
    """(the submission's time, a problem worth reporting or ""); ``nbgrader_folder``:
    the student's assignment in nbgrader's collected layout. A record that
    exists but cannot be used makes the time unknown: a later, less trusted
    source is not tried in its place."""
    if manifest and student in manifest:
        return manifest[student], ""
    records = [(entry / METADATA_FILE if entry.is_dir() and not entry.is_symlink() else None, _read_metadata),
               (nbgrader_folder / NBGRADER_TIMESTAMP if nbgrader_folder is not None else None,
                _read_nbgrader_timestamp)]
    for path, read in records:
        stamp, problem = _record(path, read, exam)
        if stamp is not None or problem:
            return stamp or Stamp(None, None, "none"), problem
    if not trust_file_times:
        return Stamp(None, None, "none"), ""
    try:
        mtime = _newest_mtime(entry)
        return (Stamp(_from_mtime(mtime), None, "mtime"), "") if mtime is not None else (Stamp(None, None, "none"), "")
    except TimeUnusable as exc:
        return Stamp(None, None, "none"), f"file times unusable: {exc}; lateness unknown"
    except OSError as exc:
        return Stamp(None, None, "none"), f"file times unreadable ({type(exc).__name__}); lateness unknown"


def carried_records(tree: Path, archive: str) -> list[str]:
    """What to say of time records inside a zip (``tree``, its exam folder
    unpacked): they are not used, since whoever made the zip wrote or copied
    them; the zip's time is the manifest's (or its own file time)."""
    carried = [name for name in (METADATA_FILE, NBGRADER_TIMESTAMP) if os.path.lexists(tree / name)]
    return [f"{name} inside {archive} not used: a zip is timed by --timestamps (or its own file time), "
            "not by a record it carries" for name in carried]


def deadline(exam: Exam, stamp: Stamp, extra_min: float = 0.0) -> datetime | None:
    start = stamp.started_at or exam.starts_at
    if start is None:
        return None
    return start + timedelta(minutes=exam.time_limit_min + extra_min)


def assess(exam: Exam, stamp: Stamp, extra_min: float = 0.0) -> Lateness:
    """Lateness of one submission under the exam's policy (grader/course/late_policy.py);
    unknown (factor 1, ``known`` False) without a usable submission time or deadline."""
    try:
        due = deadline(exam, stamp, extra_min)
    except (OverflowError, ValueError):                      # a start or extra time beyond datetime's range
        due = None
    return judge_lateness(stamp.submitted_at, due, exam.late_policy, stamp.source,
                          no_deadline="no deadline (the exam has no start time)",
                          caution="from file times: check them" if stamp.source == "mtime" else "")
