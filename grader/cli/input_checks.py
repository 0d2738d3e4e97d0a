"""Checks of the instructor's command-line input, made before any work.

A careless input (a negative timeout, a mistyped path, one student's folder
given where the class's was meant) gets one line naming the option and exit
status 2, never a traceback and never a silent substitute. The typer
callbacks here raise ``typer.BadParameter``, which click reports as
``Invalid value for '--timeout': ...`` with exit status 2.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from grader.course import DEFAULT_COURSE_FILE

# A name that belongs inside one student's folder, not in a folder of students:
# an exercise folder (01_softmax), its notebook, a checkout's exercises/, an exam's answers.
_EXERCISE_ENTRY = re.compile(r"^\d\d_[a-z0-9_]+(\.ipynb)?$")
_STUDENT_FILES = {"answers.yaml", "course.yaml", "pyproject.toml"}


# The --course option every command takes.
CourseOption = typer.Option(DEFAULT_COURSE_FILE, "--course", help="Path to course.yaml.")


def default_jobs() -> int:
    """``--jobs`` of grader grade: one more submission at once than the
    cores this process may use. While a finished run's result is read and
    the next one is handed to the sandbox, the extra one keeps the cores
    busy: a class of 300 on 2 cores took 8 % less with 3 than with 2 (3 and
    4 alike). Each run's wall-clock limit is generous next to that."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores + 1


def positive_seconds(value: float | None) -> float | None:
    """``--timeout``: more than 0 seconds (0 would not mean "no limit": it is refused)."""
    if value is not None and not value > 0:   # `not >` also refuses NaN
        raise typer.BadParameter(f"must be more than 0 seconds (got {value:g})")
    return value


MIN_MEMORY_MB = 256   # course.yaml's grading.memory_mb has the same floor: torch alone needs ~200 MiB


def memory_mib(value: int | None) -> int | None:
    """``--memory``: at least :data:`MIN_MEMORY_MB` MiB."""
    if value is not None and value < MIN_MEMORY_MB:
        raise typer.BadParameter(f"must be at least {MIN_MEMORY_MB} MiB (got {value})")
    return value


def existing_parent(value: Path | None) -> Path | None:
    """An output file whose folder must already exist (a typo in the folder
    is refused rather than written somewhere unexpected or failing late)."""
    if value is not None:
        parent = value.expanduser().resolve().parent
        if not parent.is_dir():
            raise typer.BadParameter(f"the folder {parent} does not exist")
        if value.is_dir():
            raise typer.BadParameter(f"{value} is a folder; give a file name")
    return value


def _looks_like_one_student(entries: list[Path], assignment_ids: set[str]) -> list[str]:
    """The entries that belong inside one student's folder (``assignment_ids``:
    nbgrader's ``submitted/<student>/<assignment>/`` level)."""
    signs = []
    for entry in entries:
        if _EXERCISE_ENTRY.match(entry.name) or entry.name in _STUDENT_FILES or (
                entry.name in assignment_ids and entry.is_dir() and not entry.is_symlink()
                and any(_EXERCISE_ENTRY.match(p.name) for p in entry.iterdir())):
            signs.append(entry.name)
        elif entry.name == "exercises" and entry.is_dir() and not entry.is_symlink():
            if any(_EXERCISE_ENTRY.match(p.name) for p in entry.iterdir()):
                signs.append("exercises/")
    return signs


def class_folder_problem(folder: Path, assignment_ids: set[str] = frozenset()) -> str | None:
    """Why ``folder`` is not a folder of submissions (one ``<student>/`` or
    ``<student>.zip`` per student), or None when it looks like one."""
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        return f"{folder}: cannot list it ({exc.strerror})"
    if not entries:
        return f"{folder} holds no submission: nothing to grade (expected one <student_id>/ folder or .zip per student)"
    names = {p.name for p in entries}
    if {"course.yaml", "grader", "solutions"} <= names:
        # The course repository itself (a student's clone holds no grader/ or solutions/).
        example = folder / "examples" / "submissions"
        return (f"{folder} is the course repository, not a folder of students. Pass the folder of submissions: "
                "one <student_id>/ folder or .zip per student"
                + (f", e.g. {example} (the sample class)" if example.is_dir() else ""))
    signs = _looks_like_one_student(entries, assignment_ids)
    if signs:
        shown = ", ".join(signs[:3]) + (" …" if len(signs) > 3 else "")
        return (f"{folder} looks like ONE student's folder (it holds {shown}), not a folder of students. "
                f"Pass the folder that contains it: {folder.resolve().parent}")
    return None


def check_class_folder(folder: Path, course_path: Path | None = None) -> None:
    """Exit 2 with the reason when ``folder`` is not a folder of submissions
    (``course_path``: its assignment ids tell nbgrader's per-student level)."""
    assignment_ids: set[str] = set()
    if course_path is not None:
        from grader.course import CourseError, load_course

        try:
            assignment_ids = {a.id for a in load_course(course_path, check_files=False).assignments}
        except CourseError:
            pass            # the command reports a broken course.yaml itself
    problem = class_folder_problem(folder, assignment_ids)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def check_ids(option: str, given: list[str], known: list[str], *, also: tuple[str, ...] = (),
              where: str = "course.yaml") -> None:
    """Exit 2 naming ``option`` when an id in ``given`` is not one of ``known``
    (course.yaml's exercise, assignment or exam ids) nor of ``also``."""
    unknown = [g for g in given if g not in known and g not in also]
    if unknown:
        choices = ", ".join([*known, *also]) or f"(none in {where})"
        typer.echo(f"error: {option}: no {', '.join(map(repr, unknown))} in {where}; choose from {choices}", err=True)
        raise typer.Exit(2)


def check_students(folder: Path, students: list[str]) -> None:
    """Exit 2 naming ``--student`` when one has no ``<id>/`` or ``<id>.zip`` in ``folder``."""
    missing = [s for s in students if not ((folder / s).exists() or (folder / f"{s}.zip").exists())
               or "/" in s or s.startswith(".")]
    if missing:
        typer.echo(f"error: --student: no submission of {', '.join(map(repr, missing))} in {folder}", err=True)
        raise typer.Exit(2)
