"""One exam grading run, from options to files on disk: the entry point
``grader exam grade`` uses, and the one ``grader grade --exam EXAM`` can call
(same shape as grader/session.py's ``run_grading``: returns an exit code)."""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from rich.console import Console

from grader.course import CourseError, load_course
from grader.gradebook import Gradebook, GradebookError
from grader.sandbox import Limits, Sandbox, SandboxError

EXIT_OK, EXIT_BAD_INPUT, EXIT_GRADER_BROKEN, EXIT_GRADEBOOK = 0, 2, 3, 4


def run_exam_grading(exam_id: str, submissions: Path, *, out: Path, course_path: Path, jobs: int = 1,
                     roster: Path | None = None, timestamps: Path | None = None, answers_only: bool = False,
                     timeout: float | None = None, memory: int | None = None, db: Path | None = None) -> int:
    """Grade ``exam_id`` for the submissions in ``submissions`` into ``out``
    (and into the gradebook ``db``, when given: a rerun resumes from it)."""
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
    options = {"secret": secret, "root": root, "roster": entries, "manifest": manifest}
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
    for problem in run.problems + [f"{r.student}: {p}" for r in run.results for p in r.problems]:
        console.print(f"[yellow]warning[/yellow] {problem}", highlight=False)
    late = sum(r.lateness.flagged for r in run.results)
    resumed = f", {run.resumed} exercise result(s) already in {db}" if run.resumed else ""
    print(f"graded {len(run.results)} student(s) ({'answers and code' if run.code_graded else 'answers only'}), "
          f"{late} late{resumed}\nreport: {paths['report']}\ngrades: {paths['grades']}")
    return EXIT_OK
