"""One exam grading run, from options to files on disk: the entry point
``grader exam grade`` uses, and the one ``grader grade --exam EXAM`` can call
(same shape as grader/run/session.py's ``run_grading``: returns an exit code)."""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.course import CourseError, load_course
from grader.exams.intake import visible
from grader.gradebook import Gradebook, GradebookError
from grader.sandbox import Limits, Sandbox, SandboxError

EXIT_OK, EXIT_BAD_INPUT, EXIT_GRADER_BROKEN, EXIT_GRADEBOOK = 0, 2, 3, 4


def run_exam_grading(exam_id: str, submissions: Path, *, out: Path, course_path: Path, jobs: int = 1,
                     roster: Path | None = None, timestamps: Path | None = None, answers_only: bool = False,
                     timeout: float | None = None, memory: int | None = None, db: Path | None = None,
                     trust_file_times: bool = False) -> int:
    """Grade ``exam_id`` for the submissions in ``submissions`` into ``out``
    (and into the gradebook ``db``, when given: a rerun resumes from it).
    ``trust_file_times``: without a record of a submission's time, use its
    newest file time (the student's to set) instead of "lateness unknown".

    Every line printed about a student escapes what the student controls
    (names, folder names): no markup is interpreted, no control character
    reaches the terminal, nothing is longer than a line."""
    from grader.exams.build import RosterError, read_roster
    from grader.exams.grading import grade_exam
    from grader.exams.reference_calc import ReferenceCalcError
    from grader.exams.report import write_exam_outputs
    from grader.exams.timing import read_manifest
    from grader.exams.variants import ExamSecretError, load_secret

    console = Console(stderr=True)
    root = course_path.resolve().parent
    try:
        course = load_course(course_path, check_files=False)
        exam = course.exam(exam_id)
        secret = load_secret(course, root)
        entries = read_roster(roster) if roster else None
        manifest = read_manifest(timestamps, exam) if timestamps else None
    except (CourseError, KeyError, ExamSecretError, RosterError, ValueError, OSError) as exc:
        console.print(str(exc).strip("'\""), markup=False)
        return EXIT_BAD_INPUT
    options = {"secret": secret, "root": root, "roster": entries, "manifest": manifest,
               "trust_file_times": trust_file_times}
    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="exam-"))
        try:
            if db is not None:
                options["gradebook"] = stack.enter_context(Gradebook(db))
            if answers_only or not exam.exercises:
                run = grade_exam(course, exam, submissions, workdir=Path(workdir), **options)
            else:
                limits = Limits.from_grading(course.grading, timeout_s=timeout, memory_mb=memory)
                with Sandbox(limits) as sandbox:
                    run = grade_exam(course, exam, submissions, workdir=Path(workdir), sandbox=sandbox, jobs=jobs,
                                     **options)
        except ReferenceCalcError as exc:
            console.print(f"the grader cannot compute the answer keys: {exc}", markup=False)
            return EXIT_GRADER_BROKEN
        except GradebookError as exc:
            console.print(f"gradebook error: {exc}", markup=False)
            return EXIT_GRADEBOOK
        except SandboxError as exc:
            console.print(f"the grader cannot grade: {exc}", markup=False)
            return EXIT_GRADER_BROKEN
    paths = write_exam_outputs(course, run, out)
    _summary(console, run, paths, db)
    return EXIT_OK


def _warn(console: Console, text: str) -> None:
    console.print(f"[yellow]warning[/yellow] {escape(visible(text, 300))}", highlight=False)


def _summary(console: Console, run, paths: dict[str, Path], db: Path | None) -> None:
    """Warnings (escaped, bounded), then one line of counts and the files written."""
    for problem in run.problems:
        _warn(console, problem)
    for result in run.results:
        for problem in ([result.error] if result.error else []) + result.problems:
            _warn(console, f"{result.student}: {problem}")
    handed_in = [r for r in run.results if r.submitted and not r.error]
    late = sum(r.lateness.flagged for r in handed_in)
    unknown = sum(not r.lateness.known for r in handed_in)
    unreadable = sum(bool(r.error) for r in run.results)
    counts = [f"{late} late"]
    if unknown:
        counts.append(f"{unknown} with lateness unknown (no usable submission time on record; "
                      "--timestamps gives them, grades.csv column lateness)")
    if unreadable:
        counts.append(f"{unreadable} unreadable (grades.csv column status)")
    review = sum(getattr(v, "review", False) for r in run.results for v in r.questions)
    if review:
        counts.append(f"{review} answer(s) the grader could not read, to review by hand ({paths['review']})")
    resumed = f", {run.resumed} exercise result(s) already in {db}" if run.resumed else ""
    print(f"graded {len(run.results)} student(s) ({'answers and code' if run.code_graded else 'answers only'}), "
          f"{', '.join(counts)}{resumed}\nreport: {paths['report']}\ngrades: {paths['grades']}")
