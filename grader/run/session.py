"""One ``grader grade`` run, from the command line's options to the files
on disk, with a progress bar. Kept apart from grader/cli/ so that the CLI
only parses options and this module only orchestrates."""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from grader.run.deadlines import DeadlineInputError, assess_class, load_homework_times, unknown_students
from grader.checks.inputs import GradingSecretError, HiddenInputs, load_grading_secret
from grader.course import CourseError, load_course
from grader.exams.records import exam_record_ids, recorded_exam_stats
from grader.gradebook import Gradebook, GradebookError
from grader.intake.errors import UNREADABLE
from grader.intake.names import shown, visible
from grader.intake.submissions import collect
from grader.run.grading import GRADER_ERROR, grade_class
from grader.run.output_folder import OutputFolderTaken, check_owner, mark_owner
from grader.judge import GraderError, Judge
from grader.sandbox import Limits, Sandbox, SandboxError

EXIT_OK, EXIT_BAD_INPUT, EXIT_GRADER_BROKEN, EXIT_GRADEBOOK = 0, 2, 3, 4
PROBLEM_CHARS = 300   # a problem's text shown in the terminal, at most


def run_grading(submissions: Path, *, out: Path, db: Path, jobs: int, timeout: float | None,
                memory: int | None, assignment: str | None, course_path: Path,
                exercise_ids: list[str] | None = None, executor: str = "local",
                scheduler: str | None = None, students: list[str] | None = None, force: bool = False,
                extensions: Path | None = None, timestamps: Path | None = None) -> int:
    console = Console(stderr=True)
    try:
        course = load_course(course_path)
        homework = load_homework_times(course, extensions, timestamps)
    except (CourseError, DeadlineInputError) as exc:
        console.print(str(exc), markup=False)
        return EXIT_BAD_INPUT
    if assignment:
        chosen = [a for a in course.assignments if a.id == assignment]
        if not chosen:
            console.print(f"no assignment {assignment!r}; course.yaml has: {', '.join(a.id for a in course.assignments)}")
            return EXIT_BAD_INPUT
        exercises = [course.exercise(i) for i in chosen[0].exercises]
    else:
        exercises = list(course.exercises)
    if exercise_ids:
        unknown = sorted(set(exercise_ids) - {e.id for e in exercises})
        if unknown:
            console.print(f"unknown exercise(s) {', '.join(unknown)}; choose from {', '.join(e.id for e in exercises)}")
            return EXIT_BAD_INPUT
        exercises = [e for e in exercises if e.id in exercise_ids]
    if executor not in ("local", "dask"):
        console.print(f"unknown executor {executor!r}: local or dask")
        return EXIT_BAD_INPUT
    if executor == "dask" and importlib.util.find_spec("distributed") is None:
        console.print("--executor dask needs Dask: pip install 'attention-course[scale]'")
        return EXIT_BAD_INPUT
    try:
        os.scandir(submissions).close()   # the instructor's folder: an error here is theirs, not a student's
    except OSError as exc:
        console.print(f"cannot read the submissions folder {submissions}: {exc.strerror}", markup=False)
        return EXIT_BAD_INPUT
    try:
        check_owner(out, db)   # before grading: a folder of another gradebook is never overwritten
    except OutputFolderTaken as exc:
        console.print(f"error: {exc}", markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except OSError as exc:
        console.print(f"cannot write to --out {out}: {exc.strerror}", markup=False)
        return EXIT_BAD_INPUT
    limits = Limits.from_grading(course.grading, timeout_s=timeout, memory_mb=memory)
    root = course_path.resolve().parent
    try:   # hidden inputs per submission (grader/checks/inputs.py)
        inputs = HiddenInputs(load_grading_secret(root))
    except GradingSecretError as exc:
        console.print(str(exc), markup=False)
        return EXIT_BAD_INPUT
    similarity = _SimilarityBesideGrading(course, exercises, root)
    try:
        with Gradebook(db) as gradebook, contextlib.ExitStack() as stack, \
                _work_folder() as workdir:
            if executor == "dask":  # the workers judge; this process only collects and records
                from grader.scale.dask_executor import dask_executor

                judge, runner = None, stack.enter_context(dask_executor(course_path, limits, scheduler, inputs=inputs))
                collected = collect(submissions, course, exercises, Path(workdir), root)
            else:
                sandbox = stack.enter_context(Sandbox(limits))
                # The fork-server ends its start-up (torch, its warm-up, the run
                # that reports its layers) while the class is collected here.
                layers = stack.enter_context(ThreadPoolExecutor(1)).submit(sandbox.layers)
                collected = collect(submissions, course, exercises, Path(workdir), root)
                layers.result()
                judge, runner = Judge(course, sandbox, root, inputs), None
            if unknown := unknown_students(homework, {s.student for s in collected}):
                console.print("\n".join(["error: --extensions/--timestamps name students with no submission:",
                                         *(f"  {visible(line, PROBLEM_CHARS)}" for line in unknown),
                                         "fix the id, or remove the line of a student who handed in nothing"]),
                              markup=False, soft_wrap=True)
                return EXIT_BAD_INPUT
            with Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TextColumn("ETA"), TimeRemainingColumn(), console=console) as progress:
                bar = progress.add_task("grading", total=None)

                def advance(task, record) -> None:
                    progress.update(bar, advance=1)

                run = grade_class(course, exercises, submissions, gradebook, judge, Path(workdir), jobs=jobs,
                                  executor=runner, on_result=advance, root=root, on_plan=lambda n: progress.update(bar, total=n),
                                  on_collected=similarity.start, collected=collected,
                                  students=set(students or []), force=force)
            # This command ends once the reports are written: what lived before
            # grading (torch, the references) stays out of the collector's way,
            # as it did while grading (a full collection of it: 0.12 s).
            gc.freeze()
            records = [r for r in (gradebook.get(k) for k in run.keys) if r is not None]
            lateness, late_problems = assess_class(course, run.submissions, run.keys, homework)
            gradebook.set_lateness({k: v.to_dict() for k, v in lateness.items()})
            records = gradebook.finalise(records)   # grader adjust and the late policy: in every report
            if students:  # a regrade of a few: the reports stay the whole class's, with their new results
                chosen = {e.id for e in exercises}
                records = [r for r in gradebook.records(course.course.version) if r.key.exercise in chosen]
            recorded = list(gradebook.records(course.course.version, exercises=exam_record_ids(course)))
            identity = gradebook.identity
            exams = recorded_exam_stats(course, recorded)
            # The exams' totals: a column of the class table, a section of each student's page.
            exam_totals = [r for r in recorded if r.key.exercise in {exam.id for exam in course.exams}]
    except GradebookError as exc:
        console.print(f"gradebook error: {exc}", markup=False)
        return EXIT_GRADEBOOK
    except (GraderError, SandboxError) as exc:
        if type(exc).__name__ == "SchedulerUnreachable":   # grader/scale/: imported only with Dask
            console.print(f"error: --scheduler: {exc}", markup=False)
            return EXIT_BAD_INPUT
        console.print(f"the grader cannot grade: {exc}", markup=False)
        return EXIT_GRADER_BROKEN
    for submission in run.submissions:
        for problem in submission.problems:
            # Ids and problems may carry text from students' file names: markup escaped, control bytes visible.
            console.print(f"[yellow]warning[/yellow] {shown(submission.student)}: {shown(problem, PROBLEM_CHARS)}",
                          highlight=False)
    failed = sum(r.status == GRADER_ERROR for r in records)
    if failed:
        console.print(f"[red]{failed} result(s) could not be judged[/red] (a grader error, traceback above): "
                      "they are graded again on the next run", highlight=False)
    unreadable = sum(r.status == UNREADABLE for r in records)
    if unreadable:
        console.print(f"[yellow]{unreadable} result(s) unreadable[/yellow] (links, special files, damaged or "
                      "oversized archives or notebooks): their reasons are in grades.csv and the report",
                      highlight=False)
    for problem in late_problems:
        console.print(f"[yellow]warning[/yellow] {problem}", markup=False, highlight=False)
    if lateness:
        # Counted in students, as an instructor reads it; a student late on three exercises is one.
        late = len({key.student for key, v in lateness.items() if v.flagged})
        unknown = len({key.student for key, v in lateness.items() if not v.known})
        console.print(f"deadlines: {late} late student(s)" + (
            f", {unknown} with lateness unknown (no submission time on record: --timestamps, nbgrader's "
            "timestamp.txt or a git checkout gives one; grades.csv column lateness)" if unknown else ""))
    # The report's code (jinja2, its templates) is loaded only now that it is written.
    from grader.report import write_grades_csv, write_html_report, write_results_json

    try:
        out.mkdir(parents=True, exist_ok=True)
        mark_owner(out, db, identity)
        write_grades_csv(records, out / "grades.csv")
        write_results_json(records, out / "results.json")
        similar = similarity.result() if records else ([], "")
        index = write_html_report(course, records + exam_totals, out / "report", exam_stats=exams, similarity=similar)
    except OSError as exc:
        console.print(f"cannot write the reports to {out}: {exc.strerror} ({exc.filename})", markup=False)
        return EXIT_GRADEBOOK
    console.print(f"graded {run.graded} result(s), {run.resumed} already in {db}; "
                  f"{len(run.submissions)} student(s)")
    console.print(f"gradebook: {db}\ngrades:    {out / 'grades.csv'}\nreport:    {index}")
    return EXIT_OK


@contextlib.contextmanager
def _work_folder() -> Iterator[str]:
    """A temporary folder for the run (collected submissions, references),
    removed in a thread of its own once the block ends: the reports are
    written meanwhile (~0.1 s of file removals for a class of 300 here).
    The thread is not a daemon, so the interpreter waits for it to finish;
    what cannot be removed is left behind, not printed as a traceback after
    a run that has finished."""
    folder = tempfile.TemporaryDirectory(prefix="grade-", ignore_cleanup_errors=True)
    try:
        yield folder.name
    finally:
        threading.Thread(target=folder.cleanup, name="remove-work-folder").start()


class _SimilarityBesideGrading:
    """The report's similarity section, computed in a thread while the class
    is graded (it mostly runs while the grader waits: for the fork-server,
    the references, the children). It starts from the class grading has
    just collected (:meth:`start`), so the submissions are read and checked
    once. Without two hand-ins of one exercise there is no pair to compare,
    and the report says so."""

    NONE = ([], "similarity not computed: no exercise has two submissions to compare")

    def __init__(self, course, exercises, root: Path) -> None:
        self.course, self.exercises, self.root = course, exercises, root
        self.outcome: tuple[list, str] | None = None  # set by the thread, or at once when there is none
        self.thread: threading.Thread | None = None

    def start(self, collected: list) -> None:
        """Read the collected modules now (their folders go with grading's
        work folder) and compare them in a thread."""
        from grader.run.similarity import for_report, handed_in

        try:
            texts = handed_in(self.exercises, collected)
        except Exception as exc:  # noqa: BLE001 - never stops the grading
            self.outcome = ([], f"similarity not computed: {type(exc).__name__}")
            return
        if max((len(by_student) for by_student in texts.values()), default=0) < 2:
            return  # a class of one: no thread, no copydetect

        def compute() -> None:
            self.outcome = for_report(self.course, self.exercises, texts, self.root)  # never raises

        self.thread = threading.Thread(target=compute, daemon=True, name="similarity")
        self.thread.start()

    def result(self) -> tuple[list, str]:
        if self.thread is None:
            return self.outcome or self.NONE
        self.thread.join()
        return self.outcome or ([], "similarity not computed: it stopped with an error")
