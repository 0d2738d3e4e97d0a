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
its answer cell becomes the module (``grader.notebooks``).

Nothing here imports or runs student code. Archives are unpacked by hand:
no absolute paths, no ``..``, no links, bounded sizes.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.course import REPO_ROOT, Course, Exercise
from grader.notebooks import NotebookError, extract_module

MAX_MODULE_BYTES = 1 << 20          # a module larger than 1 MiB is not a solution
MAX_ARCHIVE_BYTES = 64 << 20        # total unpacked size of one student's zip
MAX_ARCHIVE_MEMBERS = 5000
EXERCISE_FOLDER_RE = re.compile(r"^\d\d_")
STUDENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class SubmissionError(Exception):
    """A submission (or part of it) cannot be used; the message says why."""


@dataclass
class ExerciseSubmission:
    exercise: Exercise
    folder: Path | None          # prepared folder to grade, None if missing
    content_hash: str            # sha256 of the module's bytes ("" if missing)
    problem: str = ""            # why it is missing or unusable


@dataclass
class Submission:
    student: str
    source: Path
    exercises: dict[str, ExerciseSubmission] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # for the instructor's log


def _safe_member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise SubmissionError(f"unsafe path in archive: {name!r}")
    return path


def unpack_zip(archive: Path, target: Path) -> None:
    """Unpack ``archive`` into ``target``, refusing unsafe or oversized members."""
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            if len(members) > MAX_ARCHIVE_MEMBERS:
                raise SubmissionError(f"{archive.name}: {len(members)} files (at most {MAX_ARCHIVE_MEMBERS})")
            if sum(m.file_size for m in members) > MAX_ARCHIVE_BYTES:
                raise SubmissionError(f"{archive.name}: unpacks to more than {MAX_ARCHIVE_BYTES >> 20} MiB")
            for member in members:
                relative = _safe_member_path(member.filename)
                mode = member.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise SubmissionError(f"{archive.name}: symbolic link {member.filename!r} refused")
                destination = target.joinpath(*relative.parts)
                if member.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(destination, "wb") as dst:
                    # Read with a bound: the declared size can lie.
                    data = src.read(MAX_ARCHIVE_BYTES + 1)
                    if len(data) > MAX_ARCHIVE_BYTES:
                        raise SubmissionError(f"{archive.name}: {member.filename!r} is too large")
                    dst.write(data)
    except zipfile.BadZipFile as exc:
        raise SubmissionError(f"{archive.name}: not a valid zip file ({exc})") from exc


def _exercise_roots(tree: Path) -> list[Path]:
    """Where exercise folders may sit in a student's tree: the tree itself,
    ``exercises/``, and the same one level down (a zip's top folder)."""
    candidates = [tree, tree / "exercises"]
    for child in sorted(p for p in tree.iterdir() if p.is_dir() and not p.is_symlink()):
        candidates += [child, child / "exercises"]
    return [c for c in candidates if c.is_dir() and not c.is_symlink()]


def _find_notebook(tree: Path, exercise: Exercise) -> Path | None:
    """``NN_slug.ipynb`` beside the exercise folders (nbgrader's layout:
    the assignment folder is the zip-style level below the student) or in
    the exercise folder (a student checkout with the released notebooks)."""
    for root in _exercise_roots(tree):
        for candidate in (root / f"{exercise.folder}.ipynb", root / exercise.folder / f"{exercise.folder}.ipynb"):
            if candidate.exists():
                return candidate
    return None


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


def _is_untouched_stub(module: Path, exercise: Exercise, root: Path) -> bool:
    stub = root / "exercises" / exercise.folder / exercise.module
    try:
        return module.is_file() and not module.is_symlink() and module.read_bytes() == stub.read_bytes()
    except OSError:
        return False


def _find_module(tree: Path, exercise: Exercise, root: Path = REPO_ROOT) -> Path | None:
    module = None
    for candidate_root in _exercise_roots(tree):
        candidate = candidate_root / exercise.folder / exercise.module
        if candidate.exists():
            module = candidate
            break
    # A checkout has both the module and its notebook: the student worked
    # in the notebook when the module is still the untouched stub.
    if module is None or _is_untouched_stub(module, exercise, root):
        return _find_notebook(tree, exercise) or module
    return module


def _not_found(tree: Path, exercise: Exercise, limit: int = 10_000) -> str:
    """"not submitted", saying where a file named like the module sits when
    the student's layout is one the grader does not know (bounded walk,
    links not followed), so the instructor can tell a wrong folder from
    a missing exercise."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(tree):
        # Other exercises' folders hold copies of earlier modules (06 ships 05's): not a misplaced file.
        dirnames[:] = sorted(d for d in dirnames if not EXERCISE_FOLDER_RE.match(d))
        seen += len(dirnames) + len(filenames)
        if exercise.module in filenames or f"{exercise.folder}.ipynb" in filenames:
            name = exercise.module if exercise.module in filenames else f"{exercise.folder}.ipynb"
            found = (Path(dirpath) / name).relative_to(tree).as_posix()
            return (f"not submitted: found {found}, but the grader looks for "
                    f"{exercise.folder}/{exercise.module} (put the file in a folder named {exercise.folder})")
        if seen > limit:
            break
    return "not submitted"


def _prepare(exercise: Exercise, module: Path, target: Path, course: Course, root: Path) -> ExerciseSubmission:
    if module.is_symlink() or not module.is_file():
        return ExerciseSubmission(exercise, None, "", f"{module.name} is not a regular file")
    notebook = module.suffix == ".ipynb"
    if notebook:
        try:
            data = extract_module(module, exercise)
        except NotebookError as exc:
            return ExerciseSubmission(exercise, None, "", str(exc))
    size = len(data) if notebook else module.stat().st_size
    if size > MAX_MODULE_BYTES:
        return ExerciseSubmission(exercise, None, "", f"{exercise.module} is {size >> 10} KiB (at most {MAX_MODULE_BYTES >> 10} KiB)")
    if not notebook:
        data = module.read_bytes()
    return ExerciseSubmission(exercise, assemble(exercise, data, target, course, root), hashlib.sha256(data).hexdigest())


def collect(submissions_dir: Path, course: Course, exercises: list[Exercise], workdir: Path,
            root: Path = REPO_ROOT) -> list[Submission]:
    """Every student's submission, prepared for grading under ``workdir``."""
    found: list[Submission] = []
    entries = sorted(p for p in submissions_dir.iterdir() if not p.name.startswith("."))
    for entry in entries:
        student = entry.name.removesuffix(".zip") if entry.suffix == ".zip" else entry.name
        submission = Submission(student, entry)
        found.append(submission)
        if not STUDENT_ID_RE.match(student):
            submission.problems.append(f"{entry.name}: not a usable student id")
            continue
        if entry.is_symlink():
            submission.problems.append(f"{entry.name}: symbolic links are not followed")
            tree = None
        elif entry.is_dir():
            tree = entry
        elif entry.suffix == ".zip":
            tree = workdir / "unpacked" / student
            shutil.rmtree(tree, ignore_errors=True)
            try:
                unpack_zip(entry, tree)
            except SubmissionError as exc:
                submission.problems.append(str(exc))
                tree = None
        else:
            submission.problems.append(f"{entry.name}: neither a folder nor a .zip")
            tree = None
        for exercise in exercises:
            module = _find_module(tree, exercise, root) if tree is not None else None
            if module is None:
                reason = "; ".join(submission.problems) if tree is None else _not_found(tree, exercise)
                submission.exercises[exercise.id] = ExerciseSubmission(exercise, None, "", reason)
            else:
                target = workdir / "prepared" / student / exercise.folder
                submission.exercises[exercise.id] = _prepare(exercise, module, target, course, root)
    return found
