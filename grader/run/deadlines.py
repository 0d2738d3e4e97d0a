"""Homework deadlines: when each submission was handed in, when it was due
for that student, and what the assignment's late policy makes of it (the
rule is the exams' one, grader/course/late_policy.py).

The deadline of a student's exercise is its assignment's ``due`` in
course.yaml, moved by an extension from ``grader grade --extensions FILE``
(CSV: ``student_id``, ``assignment`` or ``exercise``, then ``extra_min`` or
``due``; an exercise's row wins over its assignment's).

The submission time comes only from a record that means it, most trusted first
(the result says which was used):

1. ``timestamps``: a CSV given to ``--timestamps`` (``student_id``,
   ``submitted_at``, optionally ``assignment``), exported by the system that
   collected the work (LMS, upload server);
2. ``nbgrader``: ``timestamp.txt`` in nbgrader's collected layout
   (``submitted/<student>/<assignment>/timestamp.txt``), written by ``nbgrader
   submit``; read bounded, through no link, from a regular file only;
3. ``git``: the commit date of HEAD when the student's folder is a git
   checkout (``git log -1 --format=%cI``, no hook, no pager, no fsmonitor,
   with a timeout). The student's clock made it: a late one is flagged for
   checking.

File modification times are never used: a copy resets them. Without a
record, lateness is **unknown**: said in grades.csv, results.json and the
command's summary, the score is not multiplied. A record that exists but
cannot be read also makes it unknown (a later, less trusted source is not
tried in its place).
"""
from __future__ import annotations

import csv
import dataclasses
import difflib
import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

from grader.intake.bounded_read import read_bounded
from grader.course import Assignment, Course
from grader.gradebook.records import Key
from grader.course.late_policy import Lateness, TimeUnusable, judge_lateness, parse_nbgrader_timestamp, parse_time

NBGRADER_TIMESTAMP = "timestamp.txt"
MAX_TIMESTAMP_BYTES = 128
GIT_TIMEOUT_S = 10
MAX_CSV_BYTES = 8 << 20


class DeadlineInputError(ValueError):
    """An extensions or timestamps file cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Extension:
    extra_min: float = 0.0
    due: datetime | None = None      # a new due time; wins over extra_min


@dataclass
class HomeworkTimes:
    """What ``grader grade`` knows beyond course.yaml: extensions and recorded submission times."""

    extensions: dict[tuple[str, str], Extension] = dataclasses.field(default_factory=dict)
    timestamps: dict[tuple[str, str | None], datetime] = dataclasses.field(default_factory=dict)


def _zone(course: Course) -> tzinfo | None:
    """The zone of a time written without one: that of the first due time."""
    return next((a.due.tzinfo for a in course.assignments if a.due is not None), None)


def _rows(path: Path):
    try:
        if path.stat().st_size > MAX_CSV_BYTES:
            raise DeadlineInputError(f"{path}: larger than {MAX_CSV_BYTES >> 20} MiB")
        with open(path, newline="", encoding="utf-8-sig") as fh:
            yield from enumerate(csv.DictReader(fh), start=2)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DeadlineInputError(f"{path}: cannot read it as CSV ({type(exc).__name__})") from exc


def _cell(row: dict, *names: str) -> str:
    return next(((row.get(n) or "").strip() for n in names if (row.get(n) or "").strip()), "")


def read_extensions(path: Path, course: Course) -> dict[tuple[str, str], Extension]:
    """(student, assignment or exercise id) -> extension."""
    assignments, exercises = {a.id for a in course.assignments}, {e.id for e in course.exercises}
    found: dict[tuple[str, str], Extension] = {}
    for line, row in _rows(path):
        where = f"{path}, line {line}"
        student = _cell(row, "student_id", "student", "id")
        target = _cell(row, "assignment", "exercise")
        extra, due = _cell(row, "extra_min", "extra_minutes"), _cell(row, "due", "new_due")
        if not student or not target:
            raise DeadlineInputError(f"{where}: needs student_id and assignment (or exercise)")
        if target not in assignments and target not in exercises:
            raise DeadlineInputError(f"{where}: no assignment or exercise {target!r} in course.yaml")
        if bool(extra) == bool(due):
            raise DeadlineInputError(f"{where}: give exactly one of extra_min, due")
        try:
            extension = Extension(due=parse_time(due, _zone(course))) if due else Extension(extra_min=float(extra))
        except ValueError as exc:
            raise DeadlineInputError(f"{where}: {'due: not an ISO time' if due else 'extra_min: not a number'}") from exc
        if not 0 <= extension.extra_min < 10 * 365 * 24 * 60:
            raise DeadlineInputError(f"{where}: extra_min must be 0 or more minutes (got {extra})")
        found[(student, target)] = extension
    return found


def read_timestamps(path: Path, course: Course) -> dict[tuple[str, str | None], datetime]:
    """(student, assignment id or None for every assignment) -> submission time."""
    assignments = {a.id for a in course.assignments}
    found: dict[tuple[str, str | None], datetime] = {}
    for line, row in _rows(path):
        where = f"{path}, line {line}"
        student, when = _cell(row, "student_id", "student", "id"), _cell(row, "submitted_at")
        assignment = _cell(row, "assignment") or None
        if not student or not when:
            raise DeadlineInputError(f"{where}: needs student_id and submitted_at")
        if assignment is not None and assignment not in assignments:
            raise DeadlineInputError(f"{where}: no assignment {assignment!r} in course.yaml")
        try:
            found[(student, assignment)] = parse_time(when, _zone(course))
        except ValueError as exc:
            raise DeadlineInputError(f"{where}: submitted_at: not an ISO time in 2000-2200") from exc
    return found


def unknown_students(times: HomeworkTimes, known: set[str]) -> list[str]:
    """One line per student id that the extensions or timestamps name but
    that is in no submission of the class, with the nearest known id: a
    typo there (``s22`` for ``s2``) would otherwise penalise the student the
    line was meant for without a word."""
    named = sorted({s for s, _ in times.extensions} | {s for s, _ in times.timestamps})
    problems = []
    for student in named:
        if student in known:
            continue
        near = difflib.get_close_matches(student, sorted(known), n=1, cutoff=0.5)
        where = [f for f, table in (("the extensions", times.extensions), ("the timestamps", times.timestamps))
                 if any(s == student for s, _ in table)]
        problems.append(f"{student!r} in {' and '.join(where)} is no student of this class"
                        + (f" (did you mean {near[0]!r}?)" if near else ""))
    return problems


def load_homework_times(course: Course, extensions: Path | None, timestamps: Path | None) -> HomeworkTimes:
    return HomeworkTimes(read_extensions(extensions, course) if extensions else {},
                         read_timestamps(timestamps, course) if timestamps else {})


def git_commit_time(folder: Path) -> datetime:
    """HEAD's commit date in the git checkout ``folder``. Nothing the
    student's repository configures runs: no hook, pager or fsmonitor, and
    no global or system configuration is read."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0", "HOME": os.devnull}
    # The student's .git/config is read by git: every key that could start a program in `git log`
    # (hooks, pager, fsmonitor, signature checks through gpg.program) is overridden here.
    command = ["git", "--no-pager", "-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false",
               "-c", "log.showSignature=false", "-c", "gpg.program=false",
               "-c", f"safe.directory={folder}", "-C", str(folder), "log", "-1", "--no-show-signature",
               "--format=%cI"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=GIT_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TimeUnusable(f"git log failed ({type(exc).__name__})") from exc
    if done.returncode != 0:
        raise TimeUnusable("git log found no commit")
    try:
        return parse_time(done.stdout[:MAX_TIMESTAMP_BYTES].decode("ascii"), None)
    except ValueError as exc:
        raise TimeUnusable("git log gave no ISO time") from exc


def _nbgrader_time(path: Path) -> datetime:
    try:
        data = read_bounded(path, MAX_TIMESTAMP_BYTES)
    except OSError as exc:
        raise TimeUnusable("timestamp.txt is not a regular file we can read") from exc
    if len(data) > MAX_TIMESTAMP_BYTES:
        raise TimeUnusable(f"timestamp.txt is larger than {MAX_TIMESTAMP_BYTES} bytes")
    try:
        return parse_nbgrader_timestamp(data.decode("utf-8"), None)
    except ValueError as exc:                    # UnicodeDecodeError too
        raise TimeUnusable("timestamp.txt holds no time nbgrader writes") from exc


def submission_time(entry: Path, student: str, assignment: Assignment,
                    times: HomeworkTimes) -> tuple[datetime | None, str, str]:
    """(when ``student`` handed ``assignment`` in, the record it comes from, a problem or "")."""
    recorded = times.timestamps.get((student, assignment.id)) or times.timestamps.get((student, None))
    if recorded is not None:
        return recorded, "timestamps", ""
    if entry.is_symlink() or not entry.is_dir():
        return None, "none", ""
    for path in (entry / assignment.id / NBGRADER_TIMESTAMP, entry / NBGRADER_TIMESTAMP):
        if os.path.lexists(path):
            try:
                return _nbgrader_time(path), "nbgrader", ""
            except TimeUnusable as exc:
                return None, "none", f"{exc}; lateness unknown"
    if os.path.lexists(entry / ".git"):
        try:
            return git_commit_time(entry), "git", ""
        except TimeUnusable as exc:
            return None, "none", f"{exc}; lateness unknown"
    return None, "none", ""


def due_for(assignment: Assignment, exercise_id: str, student: str, times: HomeworkTimes) -> datetime | None:
    extension = times.extensions.get((student, exercise_id)) or times.extensions.get((student, assignment.id))
    if extension is not None and extension.due is not None:
        return extension.due
    if assignment.due is None:
        return None
    return assignment.due + timedelta(minutes=extension.extra_min if extension else 0.0)


def assess_class(course: Course, submissions, keys: list[Key], times: HomeworkTimes) -> tuple[dict[Key, Lateness], list[str]]:
    """Lateness of each graded submission of an assignment with a due time
    (a missing one has none), and the problems worth reporting."""
    assignment_of = {e: a for a in course.assignments if a.due is not None for e in a.exercises}
    by_student = {s.student: s for s in submissions}
    found: dict[Key, Lateness] = {}
    problems: list[str] = []
    seen: dict[tuple[str, str], tuple[datetime | None, str]] = {}
    for key in keys:
        assignment = assignment_of.get(key.exercise)
        submission = by_student.get(key.student)
        if assignment is None or submission is None or key.content_hash == "missing":
            continue
        if (key.student, assignment.id) not in seen:
            when, source, problem = submission_time(submission.source, key.student, assignment, times)
            seen[(key.student, assignment.id)] = (when, source)
            if problem:
                problems.append(f"{key.student} {assignment.id}: {problem}")
        when, source = seen[(key.student, assignment.id)]
        extended = (key.student, key.exercise) in times.extensions or (key.student, assignment.id) in times.extensions
        lateness = judge_lateness(when, due_for(assignment, key.exercise, key.student, times), assignment.late_policy,
                                  source, caution="a git commit date: the student's clock, check it"
                                  if source == "git" else "")
        if extended:
            lateness = dataclasses.replace(lateness, note=lateness.note + " (extended deadline)")
        found[key] = lateness
    return found, problems
