"""Which files are a student's exam: one source per student, the exam's own
folder only, copied with bounds. Nothing here raises for one student's
files: every fault becomes that student's problem or refusal.

Sources (``SUBMISSIONS/<student>/`` or ``SUBMISSIONS/<student>.zip``):

- **One source per student.** A folder and a zip of the same student (a
  ``.zip`` in any case) are refused (neither is graded, the reason says so):
  merging them mixed the answers of one with the time of the other, and
  picking one silently could grade the copy the student did not mean. A zip
  inside a folder is never unpacked and is named; exam files beside
  nbgrader's own folder are named, not read. A source is timed as itself
  (grader/exams/timing.py): a zip by the manifest (or its own file time),
  never by a ``timestamp.txt`` or ``.submission.json`` it carries.
- **The exam's own folder**, first match wins:
  1. nbgrader's ``<exam>-<student>/`` inside the source (the layout
     ``nbgrader collect`` writes); a student holding only someone else's
     ``<exam>-<other>/`` is graded from it, with their own variant, and flagged;
  2. the source itself, when it holds the exam's files (``answers.yaml``,
     ``variant.json``, ``questions.md``) or an exam exercise
     (``NN_slug/`` or ``NN_slug.ipynb``): the folder as ``grader exam build`` wrote it;
  3. the one folder inside it that holds the exam's files (a zip's top
     folder), if it is not named after one of the course's assignments.

  Anything else in the source is never read: the student's homework
  (``attention/03_masking.ipynb``, collected beside the exam by nbgrader)
  is not their exam. No exam folder: the exam was not handed in.
- **Copies are bounded**: only the exam exercises' own module and notebook
  are copied for grading, regular files only (a named pipe, a device or a
  link is skipped and named), at most :data:`MAX_STAGED_BYTES` each.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course, Exercise
from grader.course.exam_schema import Exam
from grader.exams.answers_file import read_bounded
from grader.exams.nbgrader import SEPARATOR, assignment_name
from grader.intake.submissions import STUDENT_ID_RE

ANSWERS_FILE = "answers.yaml"
EXAM_FILES = (ANSWERS_FILE, "variant.json", "questions.md")
MAX_STAGED_BYTES = 32 << 20          # a notebook with outputs; the module's own cap applies later


def visible(text: object, limit: int = 120) -> str:
    """Text a student controls, fit for a log line: control and format
    characters shown as escapes (no terminal sequence survives), cut to
    ``limit`` characters. Rich markup is escaped where it is printed."""
    shown = []
    for char in str(text)[: limit + 1]:
        category = unicodedata.category(char)
        shown.append(char if category[0] != "C" else f"\\x{ord(char):02x}" if ord(char) < 0x100
                     else f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}")
    joined = "".join(shown)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


@dataclass
class ExamSubmission:
    student: str
    entry: Path | None                 # SUBMISSIONS/<student> or <student>.zip; None: nothing submitted
    tree: Path | None = None           # the exam's own folder (a zip unpacked); None: no exam found
    problems: list[str] = field(default_factory=list)
    nbgrader: bool = False             # tree is nbgrader's <exam>-<student>/ (or someone else's)
    refused: str = ""                  # the student's files cannot be graded: why (a fixed text)

    @property
    def answers_path(self) -> Path | None:
        return self.tree / ANSWERS_FILE if self.tree is not None else None

    @property
    def handed_in(self) -> bool:
        """An exam was found (or something was handed in that had to be refused)."""
        return self.tree is not None or bool(self.refused)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _folders(path: Path) -> list[Path]:
    """Sub-folders (no links, nothing hidden), sorted; [] if unreadable."""
    try:
        with os.scandir(path) as it:
            return sorted(Path(e.path) for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _holds_exam(folder: Path, exam_exercises: list[Exercise], *, exercises_count: bool) -> bool:
    names = list(EXAM_FILES)
    if exercises_count:
        names += [n for e in exam_exercises for n in (e.folder, f"{e.folder}.ipynb")]
    return any(os.path.lexists(folder / name) for name in names)


def _exam_folder(root: Path, submission: ExamSubmission, course: Course, exam: Exam) -> None:
    """Set ``submission.tree`` to the exam's own folder inside ``root`` (see the module's rules)."""
    exercises = [course.exercise(item.id) for item in exam.exercises]
    own = root / assignment_name(exam.id, submission.student)
    _name_zips(root, submission)
    if _is_dir(own):
        submission.tree, submission.nbgrader = own, True
        if _holds_exam(root, exercises, exercises_count=True):
            submission.problems.append(f"also holds exam files outside {own.name}/: not read (only nbgrader's "
                                       f"{own.name}/ is graded, with its own time)")
        return
    children = _folders(root)
    others = [p for p in children if p.name.startswith(f"{exam.id}{SEPARATOR}")]
    if len(others) == 1:
        submission.tree, submission.nbgrader = others[0], True
        submission.problems.append(f"holds nbgrader assignment(s) {visible(others[0].name)}, not {own.name}: "
                                   f"graded as it is, with {submission.student}'s variant")
        return
    if len(others) > 1:
        submission.refused = (f"holds {len(others)} nbgrader assignments of {exam.id}, none of them "
                              f"{own.name}: none graded")
        return
    if _holds_exam(root, exercises, exercises_count=True):
        submission.tree = root
        return
    homework = {a.id for a in course.assignments} | {e.id for e in course.exams if e.id != exam.id}
    candidates = [p for p in children if p.name not in homework and _holds_exam(p, exercises, exercises_count=False)]
    if len(candidates) == 1:
        submission.tree = candidates[0]
    elif candidates:
        submission.refused = (f"{len(candidates)} folders look like the exam "
                              f"({', '.join(visible(p.name, 40) for p in candidates[:5])}): hand in one")
    else:
        ignored = [visible(p.name, 40) for p in children[:5]]
        submission.problems.append(f"no {exam.id} exam in the submission"
                                   + (f" (other folders not read: {', '.join(ignored)})" if ignored else ""))


def _name_zips(root: Path, submission: ExamSubmission) -> None:
    """A zip inside a submission is another source (a later upload, say): it
    is never unpacked, and the instructor is told, not left to find out."""
    try:
        with os.scandir(root) as it:
            zips = sorted(e.name for e in it if e.name.lower().endswith(".zip") and not e.name.startswith("."))
    except OSError:
        return
    if zips:
        shown = ", ".join(visible(name, 40) for name in zips[:5]) + (f" and {len(zips) - 5} more" if len(zips) > 5 else "")
        submission.problems.append(f"holds {shown}: a zip inside a submission is not unpacked, its answers are not "
                                   "graded (hand in one folder or one zip)")


def _unpack(entry: Path, target: Path, submission: ExamSubmission) -> Path | None:
    from grader.intake.submissions import unpack_zip

    shutil.rmtree(target, ignore_errors=True)
    try:
        unpack_zip(entry, target)
        return target
    except Exception as exc:  # noqa: BLE001 - any fault of one archive is that student's
        submission.refused = f"{entry.name}: the zip cannot be used ({visible(exc, 160)})"
        return None


def _prepare_source(entry: Path, submission: ExamSubmission, workdir: Path, course: Course, exam: Exam) -> None:
    info = os.lstat(entry)
    if stat.S_ISLNK(info.st_mode):
        submission.refused = f"{entry.name}: a symbolic link; not followed"
        return
    if stat.S_ISDIR(info.st_mode):
        root = entry
    elif stat.S_ISREG(info.st_mode) and entry.suffix.lower() == ".zip":
        root = _unpack(entry, workdir / "exam-unpacked" / submission.student, submission)
        if root is None:
            return
    else:
        submission.refused = f"{visible(entry.name)}: neither a folder nor a .zip"
        return
    _exam_folder(root, submission, course, exam)


def collect_exam(submissions_dir: Path, workdir: Path, course: Course, exam: Exam
                 ) -> tuple[dict[str, ExamSubmission], list[str]]:
    """(every student's exam submission, problems of the run: entries that
    name no student). Zips are unpacked under ``workdir``."""
    by_student: dict[str, list[Path]] = {}
    run_problems = []
    with os.scandir(submissions_dir) as it:
        names = sorted(e.name for e in it if not e.name.startswith("."))
    for name in names:
        # Any case of ".zip", as homework's intake: s001/ and s001.ZIP are one student's two sources.
        student = name[:-4] if name.lower().endswith(".zip") else name
        if STUDENT_ID_RE.match(student):
            by_student.setdefault(student, []).append(submissions_dir / name)
        else:
            run_problems.append(f"skipped '{visible(name, 80)}': not a usable student id")
    found = {}
    for student, entries in by_student.items():
        submission = found[student] = ExamSubmission(student, entries[0])
        if len(entries) > 1:
            submission.refused = (f"two sources ({', '.join(visible(e.name, 80) + ('/' if _is_dir(e) else '') for e in entries)}): "
                                  "one student hands in one folder or one zip; neither graded")
            continue
        try:
            _prepare_source(entries[0], submission, workdir, course, exam)
        except Exception as exc:  # noqa: BLE001 - the boundary: one student's files never stop the class
            submission.tree, submission.refused = None, f"the submission cannot be read ({type(exc).__name__})"
    return found, run_problems


def _copy_regular(source: Path, target: Path) -> str:
    """Copy one regular file with a size cap; "" or why it was skipped."""
    try:
        data = read_bounded(source, MAX_STAGED_BYTES)
    except OSError as exc:
        return "a link" if exc.errno == errno.ELOOP else "not a regular file" if exc.errno in (
            errno.EINVAL, errno.EISDIR, errno.ENXIO) else f"unreadable ({errno.errorcode.get(exc.errno, 'error')})"
    if len(data) > MAX_STAGED_BYTES:
        return f"larger than {MAX_STAGED_BYTES >> 20} MiB"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return ""


def stage_code(tree: Path, exercises: list[Exercise], target: Path) -> list[str]:
    """Copy the exam exercises' modules and notebooks (nothing else) from the
    student's exam folder ``tree`` into ``target``, in the layout
    ``grader.intake.submissions.collect`` reads; returns what was skipped and why."""
    skipped = []
    target.mkdir(parents=True, exist_ok=True)
    for exercise in exercises:
        for relative in (Path(exercise.folder) / exercise.module, Path(exercise.folder) / f"{exercise.folder}.ipynb",
                         Path(f"{exercise.folder}.ipynb")):
            if not os.path.lexists(tree / relative) or (relative.parent != Path(".") and not _is_dir(tree / relative.parent)):
                continue
            why = _copy_regular(tree / relative, target / relative)
            if why:
                skipped.append(f"{relative.as_posix()} skipped: {why}")
    return skipped
