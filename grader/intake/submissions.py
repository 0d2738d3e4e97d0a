"""Find and normalise submissions.

``SUBMISSIONS/<student_id>/`` holds either the exercise folders as students
have them (``03_masking/attention.py``) or a whole student checkout with
``exercises/`` inside, or ``SUBMISSIONS/<student_id>.zip`` holds either.
Each exercise is copied into a fresh folder of the grader's work dir with
only its module; modules the exercise ships from earlier exercises come from
the references (only the exercise's own symbols are graded).

A notebook can stand in for the module: nbgrader's collected
``submitted/<student>/<assignment>/NN_slug.ipynb``, a plain ``NN_slug.ipynb``
in the student's folder, or the one beside the stub in a student checkout;
its answer cell becomes the module (``grader.intake.notebooks``). Homework is taken
only from its own assignment's folder, never from an exam's.

Nothing here imports or runs student code, and nothing follows a link:
each submission is first read into an index (``grader.intake``) that
refuses links, special files and oversized or malformed archives. Every
way one student's submission can fail to be read, whatever raises, gives
that student the status ``unreadable`` with a fixed reason; the class goes
on. One student has one source: a folder and a zip of one id are refused.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.intake import IntakeLimits, SubmissionTree, Unreadable, read_folder
from grader.intake.archive import read_zip, unpack_zip_checked
from grader.intake.errors import UNREADABLE, internal_reason, plain_path
from grader.intake.tree import SKIPPED_FOLDERS
from grader.intake.identity import lookalike_groups, lookalike_note
from grader.intake.names import STUDENT_ID_RE, placeholder_id, usable_student_id, visible
from grader.intake.notebooks import MAX_NOTEBOOK_BYTES, NotebookError, answer_from_notebook

__all__ = ["MAX_ARCHIVE_BYTES", "MAX_ARCHIVE_MEMBERS", "MAX_MODULE_BYTES", "STUDENT_ID_RE", "UNREADABLE",
           "ExerciseSubmission", "Submission", "SubmissionError", "assemble", "collect", "unpack_zip"]

MAX_MODULE_BYTES = 1 << 20          # a module larger than 1 MiB is not a solution
LIMITS = IntakeLimits()
MAX_ARCHIVE_BYTES = LIMITS.submission_bytes
MAX_ARCHIVE_MEMBERS = LIMITS.entries
EXERCISE_FOLDER_RE = re.compile(r"^\d\d_")
UNUSABLE_ID = ("the folder name is not a usable student id (letters, digits and ._@- only, at most 64 "
               "characters); the instructor must rename it")


class SubmissionError(Exception):
    """A submission (or part of it) cannot be used; the message says why."""


@dataclass
class ExerciseSubmission:
    exercise: Exercise
    folder: Path | None          # prepared folder to grade, None if missing or unreadable
    content_hash: str            # sha256 of the module's bytes ("" if missing)
    problem: str = ""            # why it is missing or unusable
    status: str = ""             # "unreadable" when handed in but not readable; "" otherwise


@dataclass
class Submission:
    student: str
    source: Path
    exercises: dict[str, ExerciseSubmission] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # for the instructor's log (printed through names.shown)


def unreadable(exercise: Exercise, reason: str) -> ExerciseSubmission:
    """An exercise handed in but not readable: keyed by its reason, so that a
    fixed submission (another reason, or none) is graded again."""
    digest = hashlib.sha256(reason.encode()).hexdigest()[:16]
    return ExerciseSubmission(exercise, None, f"{UNREADABLE}-{digest}", reason, UNREADABLE)


def unpack_zip(archive: Path, target: Path) -> None:
    """Unpack ``archive`` into ``target``, refusing unsafe, malformed or
    oversized members (``grader.intake.archive``) with a :class:`SubmissionError`."""
    try:
        unpack_zip_checked(archive, target, LIMITS)
    except Unreadable as exc:
        raise SubmissionError(f"{archive.name}: {exc.reason}") from None


def _wanted(exercises: list[Exercise]) -> dict[str, int]:
    """The file names the grader reads, with the most bytes it reads of each."""
    wanted = {e.module: MAX_MODULE_BYTES for e in exercises}
    wanted.update({f"{e.folder}.ipynb": MAX_NOTEBOOK_BYTES for e in exercises})
    return wanted


def _folder_kind(name: str, exercise: Exercise, course: Course, exam: str | None) -> str:
    """What a folder one level below the student is: "own" (this work's
    assignment or exam folder), "other" (another assignment's or exam's),
    or "plain" (a zip's top folder, a checkout)."""
    for assignment in course.assignments:
        if name == assignment.id:
            return "own" if exam is None and exercise.id in assignment.exercises else "other"
    for other in course.exams:
        if name == other.id or name.startswith(f"{other.id}-"):
            return "own" if exam == other.id else "other"
    return "plain"


def _exercise_roots(tree: SubmissionTree, exercise: Exercise, course: Course, exam: str | None = None) -> list:
    """Where exercise folders may sit in a student's tree: the tree itself,
    ``exercises/``, and the same one level down (a zip's top folder, or
    nbgrader's assignment folder). An assignment's or exam's folder is
    searched only for its own work: homework never comes from an exam, nor
    an exam's code from homework (``exam``: the exam being graded)."""
    candidates = [(), ("exercises",)]
    for child in tree.subdirs(()):
        if child.startswith(".") or child in SKIPPED_FOLDERS or _folder_kind(child, exercise, course, exam) == "other":
            continue
        candidates += [(child,), (child, "exercises")]
    return [c for c in candidates if tree.is_dir(c)]


def _normalised(source: bytes) -> bytes:
    """The bytes with what means nothing removed: a BOM, CR line ends,
    trailing spaces, trailing blank lines."""
    text = source.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return b"\n".join(line.rstrip() for line in text.split(b"\n")).rstrip(b"\n")


def _is_untouched_stub(data: bytes | None, exercise: Exercise, root: Path) -> bool:
    stub = root / "exercises" / exercise.folder / exercise.module
    try:
        return data is not None and _normalised(data) == _normalised(stub.read_bytes())
    except OSError:
        return False


def _find(tree: SubmissionTree, exercise: Exercise, course: Course, root: Path, exam: str | None,
          bare_modules: bool) -> tuple | None:
    """The path parts of the file to grade: the module, or its notebook when
    the module is missing or still the untouched stub (a checkout has both:
    the student worked in the notebook)."""
    roots = _exercise_roots(tree, exercise, course, exam)
    modules = [r + (exercise.folder, exercise.module) for r in roots]
    if bare_modules:   # Gradescope's file upload: the module alone
        modules.append((exercise.module,))
    module = next((m for m in modules if tree.file(m) is not None), None)
    if module is None or _is_untouched_stub(tree.file(module).data, exercise, root):
        notebook_name = f"{exercise.folder}.ipynb"
        notebooks = [p for r in roots for p in (r + (notebook_name,), r + (exercise.folder, notebook_name))]
        return next((n for n in notebooks if tree.file(n) is not None), None) or module
    return module


def _not_found(tree: SubmissionTree, exercise: Exercise, course: Course, exam: str | None) -> str:
    """"not submitted", saying where a file named like the module sits when
    the student's layout is one the grader does not know, or when it sits in
    another assignment's or exam's folder, so the instructor can tell a wrong
    folder from a missing exercise. Other exercises' folders hold copies of
    earlier modules (06 ships 05's): not misplaced."""
    names = (exercise.module, f"{exercise.folder}.ipynb")
    for parts in sorted(tree.files):
        if parts[-1] not in names or any(EXERCISE_FOLDER_RE.match(p) for p in parts[:-1]):
            continue
        if len(parts) > 1 and _folder_kind(parts[0], exercise, course, exam) == "other":
            own = exam or next((a.id for a in course.assignments if exercise.id in a.exercises), "its own")
            return (f"not submitted: {parts[-1]} is only in {plain_path(parts[0])}/, another assignment's or "
                    f"exam's folder; this work is taken from {plain_path(own)}/ only")
        return (f"not submitted: found {plain_path(parts)}, but the grader looks for "
                f"{exercise.folder}/{exercise.module} (put the file in a folder named {exercise.folder})")
    return "not submitted"


def assemble(exercise: Exercise, module_source: bytes, target: Path, course: Course, root: Path = REPO_ROOT) -> Path:
    """A folder to grade: the exercise's module, plus the modules it ships
    from earlier exercises, taken from their references (only the
    exercise's own symbols are graded)."""
    target.mkdir(parents=True, exist_ok=True)
    for shipped_id in exercise.ships:
        shipped = course.exercise(shipped_id)
        shutil.copyfile(root / "solutions" / shipped.folder / shipped.module, target / shipped.module)
    (target / exercise.module).write_bytes(module_source)
    return target


def _prepare(tree: SubmissionTree, parts: tuple, exercise: Exercise, target: Path, course: Course,
             root: Path) -> ExerciseSubmission:
    blob = tree.file(parts)
    name = parts[-1]
    notebook = name.endswith(".ipynb")
    cap = MAX_NOTEBOOK_BYTES if notebook else MAX_MODULE_BYTES
    if blob.too_large or blob.data is None:
        unit, shift = ("MiB", 20) if notebook else ("KiB", 10)
        size = f"{blob.size >> 20} MiB" if blob.size >= 1 << 20 or notebook else f"{blob.size >> 10} KiB"
        return unreadable(exercise, f"{name} is {size} (at most {cap >> shift} {unit})")
    data = blob.data
    if notebook:
        try:
            data = answer_from_notebook(data, exercise, name).encode("utf-8")
        except NotebookError as exc:
            return unreadable(exercise, str(exc))
        if len(data) > MAX_MODULE_BYTES:
            return unreadable(exercise, f"{exercise.module} is {len(data) >> 10} KiB "
                                        f"(at most {MAX_MODULE_BYTES >> 10} KiB)")
    return ExerciseSubmission(exercise, assemble(exercise, data, target, course, root), hashlib.sha256(data).hexdigest())


def _read(entry: Path, wanted: dict[str, int]) -> SubmissionTree:
    """The index of one source (a folder or a zip), following nothing."""
    try:
        mode = os.lstat(entry).st_mode
    except OSError:
        raise Unreadable("the submission cannot be read") from None
    if entry.name.lower().endswith(".zip") and not stat.S_ISDIR(mode):
        return read_zip(entry, wanted, LIMITS)
    if stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return read_folder(entry, wanted, LIMITS)
    raise Unreadable("the submission is neither a folder nor a .zip")


def _sources(submissions_dir: Path) -> dict[str, list[Path]]:
    """Each name's entries: ``s1/`` and ``s1.zip`` are one student's two sources."""
    grouped: dict[str, list[Path]] = {}
    with os.scandir(submissions_dir) as listing:
        names = sorted(entry.name for entry in listing if not entry.name.startswith("."))
    for name in names:
        student = name[:-4] if name.lower().endswith(".zip") else name
        grouped.setdefault(student, []).append(submissions_dir / name)
    return grouped


def _shown_name(entry: Path) -> str:
    try:
        folder = stat.S_ISDIR(os.lstat(entry).st_mode)
    except OSError:
        folder = False
    return plain_path(entry.name) + ("/" if folder else "")


def _collect_one(student: str, entries: list[Path], course: Course, exercises: list[Exercise], workdir: Path,
                 root: Path, exam: str | None, bare_modules: bool) -> Submission:
    if not usable_student_id(student):
        submission = Submission(placeholder_id(student), entries[0])
        submission.problems.append(f"{visible(entries[0].name)!s}: not a usable student id; recorded as "
                                   f"{submission.student}")
        submission.exercises = {e.id: unreadable(e, UNUSABLE_ID) for e in exercises}
        return submission
    submission = Submission(student, entries[0])
    if len(entries) > 1:
        reason = f"two submissions: {' and '.join(_shown_name(e) for e in entries)}; hand in one"
        submission.problems.append(reason)
        submission.exercises = {e.id: unreadable(e, reason) for e in exercises}
        return submission
    try:
        tree = _read(entries[0], _wanted(exercises))
    except Unreadable as exc:
        submission.problems.append(exc.reason)
        submission.exercises = {e.id: unreadable(e, exc.reason) for e in exercises}
        return submission
    for exercise in exercises:
        try:
            parts = _find(tree, exercise, course, root, exam, bare_modules)
            if parts is None:
                submission.exercises[exercise.id] = ExerciseSubmission(exercise, None, "",
                                                                        _not_found(tree, exercise, course, exam))
            else:
                target = workdir / "prepared" / student / exercise.folder
                submission.exercises[exercise.id] = _prepare(tree, parts, exercise, target, course, root)
        except Exception as exc:  # noqa: BLE001 - one exercise's error is this student's, not the class's
            submission.problems.append(f"{exercise.id}: {type(exc).__name__}: {visible(str(exc))}")
            submission.exercises[exercise.id] = unreadable(exercise, internal_reason(exc))
    return submission


def collect(submissions_dir: Path, course: Course, exercises: list[Exercise], workdir: Path,
            root: Path = REPO_ROOT, *, sources: dict[str, Path] | None = None, exam: str | None = None,
            bare_modules: bool = False) -> list[Submission]:
    """Every student's submission, prepared for grading under ``workdir``.

    ``sources``: student -> folder or zip, instead of the entries of
    ``submissions_dir`` (Gradescope's one submission); ``exam``: the exam
    whose code is collected (its folder only); ``bare_modules``: a module
    file at the top of the tree counts (Gradescope's upload). Every student
    gets one result per exercise, whatever their files hold."""
    grouped = {s: [p] for s, p in sources.items()} if sources is not None else _sources(submissions_dir)
    found: list[Submission] = []
    for student, entries in sorted(grouped.items()):
        try:
            found.append(_collect_one(student, entries, course, exercises, workdir, root, exam, bare_modules))
        except Exception as exc:  # noqa: BLE001 - whatever one student's files do, the class goes on
            safe = student if usable_student_id(student) else placeholder_id(student)
            submission = Submission(safe, entries[0], problems=[f"{type(exc).__name__}: {visible(str(exc))}"])
            submission.exercises = {e.id: unreadable(e, internal_reason(exc)) for e in exercises}
            found.append(submission)
    # S1 and s1, or a look-alike: one identity (grader/intake/identity.py); said, on each of them.
    for ids in lookalike_groups(s.student for s in found):
        for submission in found:
            if submission.student in ids:
                submission.problems.append(lookalike_note(ids))
    return found
