"""Grade an exam: every student's answers and (when a sandbox is given) code,
with their own variant, and the late policy applied to the total.

Entry point for the grading pipeline: :func:`grade_exam`. It needs no
sandbox for the questions (answers are data; numeric keys come from the
references, run in a subprocess); the code part runs the exercises' hidden
checks, built for each student's variant, through the sandbox the caller
passes (``grader.sandbox.Sandbox``), one :func:`grader.exams.checks.variant_judge`
per student.

Submissions are laid out as for ``grader grade``: ``SUBMISSIONS/<student>/``
(the exam folder as built, or one level down) or ``SUBMISSIONS/<student>.zip``;
or as nbgrader collects them, ``submitted/<student>/<exam>-<student>/``
(grader/exams/nbgrader.py), of which only the student's own exam is graded.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course, Exam
from grader.exams.answers import QuestionVerdict, grade_answers, read_answers
from grader.exams.build import RosterEntry
from grader.exams.nbgrader import SEPARATOR, assignment_name
from grader.exams.questions import answer_keys, shown_questions
from grader.exams.timing import Lateness, Stamp, assess, find_stamp
from grader.exams.variants import Variant, make_variant
from grader.submissions import STUDENT_ID_RE, SubmissionError, unpack_zip

ANSWERS_FILE = "answers.yaml"


@dataclass
class ExamSubmission:
    student: str
    entry: Path | None                 # SUBMISSIONS/<student> or <student>.zip; None: nothing submitted
    tree: Path | None = None           # where the student's files are (a zip unpacked)
    problems: list[str] = field(default_factory=list)
    nbgrader: bool = False             # tree is nbgrader's <entry>/<exam>-<student>/

    @property
    def answers_path(self) -> Path | None:
        if self.tree is None:
            return None
        for folder in [self.tree, *sorted(p for p in self.tree.iterdir() if p.is_dir() and not p.is_symlink())]:
            if (folder / ANSWERS_FILE).is_file():
                return folder / ANSWERS_FILE
        return self.tree / ANSWERS_FILE


@dataclass
class ExamResult:
    student: str
    sizes: dict
    questions: list[QuestionVerdict]
    exercises: dict[str, dict]          # exercise id -> result (empty when code was not graded)
    lateness: Lateness
    problems: list[str] = field(default_factory=list)
    code_graded: bool = False
    code_max: float = 0.0
    submitted: bool = True

    @property
    def question_points(self) -> float:
        return round(sum(v.points for v in self.questions), 6)

    @property
    def question_max(self) -> float:
        return round(sum(v.max_points for v in self.questions), 6)

    @property
    def code_points(self) -> float:
        return round(sum(e["points"] for e in self.exercises.values()), 6)

    @property
    def raw_points(self) -> float:
        return round(self.question_points + self.code_points, 6)

    @property
    def max_points(self) -> float:
        return round(self.question_max + (self.code_max if self.code_graded else 0.0), 6)

    @property
    def points(self) -> float:
        """After the late policy."""
        return round(self.raw_points * self.lateness.factor, 6)

    def to_dict(self) -> dict:
        return {"student": self.student, "sizes": self.sizes, "points": self.points, "max_points": self.max_points,
                "raw_points": self.raw_points, "question_points": self.question_points,
                "question_max": self.question_max, "code_points": self.code_points,
                "code_max": self.code_max, "code_graded": self.code_graded, "submitted": self.submitted, "lateness": self.lateness.to_dict(),
                "questions": [v.to_dict() for v in self.questions], "exercises": self.exercises,
                "problems": self.problems}


@dataclass
class ExamRun:
    exam: Exam
    results: list[ExamResult]
    code_graded: bool
    problems: list[str] = field(default_factory=list)
    resumed: int = 0                   # exam exercises taken from the gradebook, not graded again


def _nbgrader_assignment(submission: ExamSubmission, exam_id: str) -> None:
    """nbgrader's collected layout: the tree is the student's own
    ``<exam>-<student>/`` (nbgrader collects a student's other assignments
    beside it); a student who holds only someone else's is named."""
    own = submission.entry / assignment_name(exam_id, submission.student)
    if own.is_dir() and not own.is_symlink():
        submission.tree, submission.nbgrader = own, True
        return
    others = sorted(p.name for p in submission.entry.glob(f"{exam_id}{SEPARATOR}*") if p.is_dir())
    if others:
        submission.problems.append(f"holds nbgrader assignment(s) {', '.join(others)}, not {own.name}: "
                                   f"graded as it is, with {submission.student}'s variant")


def collect_exam(submissions_dir: Path, workdir: Path, exam_id: str | None = None) -> dict[str, ExamSubmission]:
    """Every student's exam submission (zips unpacked under ``workdir``);
    with ``exam_id``, nbgrader's layout is recognised."""
    found: dict[str, ExamSubmission] = {}
    for entry in sorted(p for p in submissions_dir.iterdir() if not p.name.startswith(".")):
        student = entry.name.removesuffix(".zip") if entry.suffix == ".zip" else entry.name
        submission = found.setdefault(student, ExamSubmission(student, entry))
        if not STUDENT_ID_RE.match(student):
            submission.problems.append(f"{entry.name}: not a usable student id")
        elif entry.is_symlink():
            submission.problems.append(f"{entry.name}: symbolic links are not followed")
        elif entry.is_dir():
            submission.tree = entry
            if exam_id is not None:
                _nbgrader_assignment(submission, exam_id)
        elif entry.suffix == ".zip":
            tree = workdir / "exam-unpacked" / student
            shutil.rmtree(tree, ignore_errors=True)
            try:
                unpack_zip(entry, tree)
                submission.tree = tree
            except SubmissionError as exc:
                submission.problems.append(str(exc))
        else:
            submission.problems.append(f"{entry.name}: neither a folder nor a .zip")
    return {s: sub for s, sub in found.items() if STUDENT_ID_RE.match(s)}


def _grade_code(course: Course, exam: Exam, submissions_dir: Path, variants: dict[str, Variant], sandbox,
                workdir: Path, root: Path, jobs: int, nbgrader: dict[str, Path],
                book=None) -> tuple[dict[str, dict[str, dict]], int]:
    """Per student, per exercise: the hidden checks of the student's variant
    (``nbgrader``: student -> their own assignment folder, graded alone),
    and how many of those results came from the gradebook.

    With a gradebook (``book``), parts already recorded are taken from it and
    each student's new parts are recorded as soon as the student is done
    (by this thread: the gradebook is not shared across threads)."""
    from grader.exams.checks import variant_judge
    from grader.exams.records import part_from_record, part_key, record_part
    from grader.submissions import collect

    exercises = [course.exercise(item.id).model_copy(update={"points": item.points}) for item in exam.exercises]
    submissions = {s.student: s for s in collect(submissions_dir, course, exercises, workdir / "code", root)}
    if nbgrader:
        # The notebooks and modules of the student's own assignment only (links
        # stay links, which collect refuses), as SUBMISSIONS/<student>/.
        staged = workdir / "nbgrader-assignments"
        for student, tree in nbgrader.items():
            shutil.copytree(tree, staged / student, symlinks=True, ignore=_not_code)
        submissions.update({s.student: s for s in collect(staged, course, exercises, workdir / "code-nbgrader", root)})
    results: dict[str, dict[str, dict]] = {student: {} for student in variants}
    todo: dict[str, list[tuple]] = {}
    resumed = 0
    for student in sorted(variants):
        for exercise in exercises:
            part = submissions[student].exercises.get(exercise.id) if student in submissions else None
            key = part_key(course, exam, exercise.id, variants[student], part.content_hash if part else None)
            recorded = book.get(key) if book is not None else None
            if recorded is not None:
                results[student][exercise.id] = part_from_record(recorded)
                resumed += 1
            else:
                todo.setdefault(student, []).append((exercise, part, key))

    def grade_student(student: str) -> tuple[str, list[tuple]]:
        judge = variant_judge(course, sandbox, root, variants[student])
        graded = []
        for exercise, part, key in todo[student]:
            result = judge.grade(exercise, part.folder if part else None, workdir / "judge" / student)
            graded.append((exercise.id, key, {
                "points": result.points, "max_points": result.max_points, "status": result.status,
                "reason": (part.problem if part else "") or result.reason,
                "verdicts": [v.to_dict() for v in result.verdicts]}))
        return student, graded

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(grade_student, student) for student in todo]):
            student, graded = future.result()
            for exercise_id, key, part in graded:
                if book is not None:
                    record_part(book, key, part)
                results[student][exercise_id] = part
    return results, resumed


def _not_code(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if not (n.endswith((".ipynb", ".py")) or (Path(folder) / n).is_dir())]


def grade_exam(course: Course, exam: Exam, submissions_dir: Path, *, secret: bytes, root: Path, workdir: Path,
               roster: list[RosterEntry] | None = None, manifest: dict[str, Stamp] | None = None,
               sandbox=None, jobs: int = 1, gradebook=None,
               on_result: Callable[[ExamResult], None] | None = None) -> ExamRun:
    """Grade every student of the roster (and anyone else who submitted).

    Without ``sandbox`` only the questions are graded (``ExamRun.code_graded``
    is False and the code points count neither way). With ``gradebook``
    (a ``grader.gradebook.Gradebook``) every result is recorded there and a
    rerun grades only what is not recorded yet (grader/exams/records.py)."""
    submissions = collect_exam(submissions_dir, workdir, exam.id)
    extra = {entry.student: entry.extra_time_min for entry in roster or []}
    students = list(dict.fromkeys([*(e.student for e in roster or []), *sorted(submissions)]))
    run_problems = [f"{s}: submitted but not on the roster" for s in submissions if roster is not None and s not in extra]
    variants = {s: make_variant(course, exam, s, secret) for s in students}
    keys = answer_keys(course, exam, list(variants.values()), root)
    code_graded = sandbox is not None and bool(exam.exercises)
    nbgrader = {s: sub.tree for s, sub in submissions.items() if sub.nbgrader and sub.tree is not None}
    code, resumed = (_grade_code(course, exam, submissions_dir, variants, sandbox, workdir, root, jobs, nbgrader,
                                 gradebook) if code_graded else ({}, 0))
    code_max = sum(item.points for item in exam.exercises)
    results = []
    for student in students:
        submission = submissions.get(student, ExamSubmission(student, None))
        problems = list(submission.problems)
        answers: dict = {}
        if submission.entry is None:
            problems.append("nothing submitted")
        elif submission.tree is not None and exam.questions:
            answers, answer_problems = read_answers(submission.answers_path)
            problems += answer_problems
        shown = shown_questions(course, exam, variants[student])
        verdicts = grade_answers(shown, keys[student], answers)
        if submission.entry is not None:
            stamp, problem = find_stamp(submission.entry, student, exam, manifest,
                                        nbgrader_folder=submission.tree if submission.nbgrader else None)
            problems += [problem] if problem else []
        else:
            stamp = Stamp(None, None, "none")
        result = ExamResult(student, dict(variants[student].sizes), verdicts, code.get(student, {}),
                            assess(exam, stamp, extra.get(student, 0.0)), problems,
                            code_graded=code_graded, code_max=code_max, submitted=submission.entry is not None)
        results.append(result)
        if gradebook is not None:
            from grader.exams.records import record_total

            record_total(gradebook, course, exam, result, variants[student])
        if on_result is not None:
            on_result(result)
    return ExamRun(exam, results, code_graded=code_graded, problems=run_problems, resumed=resumed)
