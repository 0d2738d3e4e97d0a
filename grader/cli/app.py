"""The ``grader`` command: the root app, its commands, and the sub-apps
mounted on it (release, push, exam, export). Each command parses its options
and hands them to one function of the pipeline."""
from __future__ import annotations

from pathlib import Path

import typer

from grader.cli.exam import exam_app
from grader.cli.export import export_app
from grader.cli.input_checks import (
    CourseOption, check_class_folder, check_students, default_jobs, existing_parent, memory_mib, positive_seconds,
)
from grader.cli.release import push_app, release_app, release_course
from grader.course import CourseError, load_course

# A feature that adds to course.yaml registers its check with load_course when
# imported (the course model imports no feature): every command checks exams.
import grader.exams  # noqa: F401,E402

app = typer.Typer(help="Grade the attention & Transformers course.", no_args_is_help=True, add_completion=False)


@app.callback()
def _root() -> None:
    """Grade the attention & Transformers course."""


@app.command()
def validate(course: Path = CourseOption) -> None:
    """Check course.yaml and the files it names; print every problem."""
    try:
        loaded = load_course(course)
    except CourseError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    n_variants = sum(len(e.pitfalls) for e in loaded.exercises)
    typer.echo(
        f"{course}: ok ({len(loaded.exercises)} exercises, {len(loaded.pitfalls)} pitfalls, "
        f"{n_variants} pitfall variants, {len(loaded.assignments)} assignments)"
    )


@app.command()
def selftest(
    exercise_ids: list[str] = typer.Argument(None, help="Exercise ids (01, 02, ...); default: all."),
    course: Path = CourseOption,
) -> None:
    """Run the public tests against each reference, stub and pitfall variant."""
    from grader.proofs.session import run_selftest

    raise typer.Exit(run_selftest(course, exercise_ids or []))


@app.command()
def check(
    exercise_ids: list[str] = typer.Argument(None, help="Exercise ids (01, 02, ...); default: all."),
    course: Path = CourseOption,
    json_path: Path = typer.Option(None, "--json", callback=existing_parent, help="Also write the matrix as JSON."),
) -> None:
    """Run references, stubs and pitfall variants through the hidden checks."""
    from grader.proofs.session import run_check

    raise typer.Exit(run_check(course, exercise_ids or [], json_path))


@app.command()
def grade(
    submissions: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of <student_id>/ folders or .zip files."),
    out: Path = typer.Option(Path("grading"), "--out", help="Where grades.csv, results.json and report/ go."),
    db: Path = typer.Option(Path("grades.db"), "--db", dir_okay=False, help="The SQLite gradebook (created if missing)."),
    jobs: int = typer.Option(default_jobs(), "--jobs", "-j", min=1,
                             help="Submissions graded at once (default: one more than the cores)."),
    timeout: float = typer.Option(None, "--timeout", callback=positive_seconds,
                                  help="Seconds per submission and exercise, more than 0 (default: course.yaml)."),
    memory: int = typer.Option(None, "--memory", callback=memory_mib,
                               help="MiB per sandboxed run, at least 256 (default: course.yaml)."),
    assignment: str = typer.Option(None, "--assignment", help="Grade only this assignment's exercises."),
    exercise: list[str] = typer.Option(None, "--exercise", "-e", help="Grade only these exercises (repeatable)."),
    exam: str = typer.Option(None, "--exam", help="Grade this exam (answers and code, per-student variants); "
                                                  "more options: grader exam grade."),
    executor: str = typer.Option("local", "--executor", help="local (threads here) or dask (a Dask cluster)."),
    scheduler: str = typer.Option(None, "--scheduler", help="Dask scheduler address (default: a LocalCluster here)."),
    student: list[str] = typer.Option(None, "--student", "-s", help="Grade only these students (repeatable)."),
    extensions: Path = typer.Option(None, "--extensions", exists=True, dir_okay=False,
                                    help="CSV student_id, assignment or exercise, extra_min or due: deadline extensions."),
    timestamps: Path = typer.Option(None, "--timestamps", exists=True, dir_okay=False,
                                    help="CSV student_id, submitted_at[, assignment]: when each handed in."),
    force: bool = typer.Option(False, "--force", help="Grade again what the gradebook already has (a regrade: "
                               "the old result is kept in its history, adjustments stay in effect)."),
    course: Path = CourseOption,
) -> None:
    """Grade a class into the gradebook and write the reports.

    Exits 0 when grading completed (whatever the students scored), non-zero
    only when the grader could not do its job."""
    from coursekit.heap import frozen_imports

    with frozen_imports():  # torch and the checks: objects for the process's life, next to no garbage
        from grader.run.session import run_grading

    check_class_folder(submissions, course)
    check_students(submissions, student or [])
    if exam and (student or force):
        typer.echo("error: --student and --force regrade exercises; for an exam, grade it again with a new --db "
                   "or see grader exam grade", err=True)
        raise typer.Exit(2)
    if exam:  # into the same gradebook; the exam's own files as well (grader/exams/session.py)
        from grader.exams.session import run_exam_grading

        raise typer.Exit(run_exam_grading(exam, submissions, out=out, course_path=course, jobs=jobs,
                                          timeout=timeout, memory=memory, db=db))

    raise typer.Exit(run_grading(submissions, out=out, db=db, jobs=jobs, timeout=timeout, memory=memory,
                                 assignment=assignment, exercise_ids=exercise or [], course_path=course,
                                 executor=executor, scheduler=scheduler, students=student or [], force=force,
                                 extensions=extensions, timestamps=timestamps))


@app.command()
def watch(
    folder: Path = typer.Argument(None, exists=True, file_okay=False,
                                  help="A folder of <student_id>/ folders or .zip files to watch."),
    exchange: Path = typer.Option(None, "--exchange", exists=True, file_okay=False,
                                  help="nbgrader's exchange root: watch <root>/<course>/inbound."),
    nbgrader_course: str = typer.Option(None, "--nbgrader-course", help="The nbgrader course id (default: course.yaml's)."),
    db: Path = typer.Option(Path("grades.db"), "--db", help="The SQLite gradebook (created if missing)."),
    feedback: Path = typer.Option(None, "--feedback", file_okay=False,
                                  help="Where a plain folder's students find feedback/<student>/feedback.html."),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="Submissions graded at once."),
    per_hour: int = typer.Option(None, "--per-hour", min=1, help="Graded submissions per student and hour "
                                                                  "(default: course.yaml watch.submissions_per_hour)."),
    assignment: str = typer.Option(None, "--assignment", help="Only this assignment."),
    exercise: list[str] = typer.Option(None, "--exercise", "-e", help="A plain folder's exercises (repeatable)."),
    once: bool = typer.Option(False, "--once", help="Grade what is there now, then stop (cron, tests)."),
    roster: Path = typer.Option(None, "--roster", exists=True, dir_okay=False,
                                help="CSV: student_id and, where it differs, unix_user (who runs nbgrader submit)."),
    course: Path = CourseOption,
) -> None:
    """Grade each submission as it arrives (sandbox kept warm) and write its
    feedback where the student fetches it; Ctrl-C stops, a restart resumes."""
    from grader.watch.session import run_watch

    raise typer.Exit(run_watch(folder, exchange=exchange, nbgrader_course=nbgrader_course, db=db,
                               feedback_dir=feedback, jobs=jobs, per_hour=per_hour, assignment=assignment,
                               exercise_ids=exercise or [], once=once, course_path=course, roster_path=roster))


@app.command()
def similarity(
    submissions: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of <student_id>/ folders or .zip files."),
    exercise: list[str] = typer.Option(None, "--exercise", "-e", help="Only these exercises (repeatable; default: all)."),
    threshold: float = typer.Option(0.7, "--threshold", min=0.05, max=1.0,
                                    help="Flag a pair when this share of either one's own code is found in the other."),
    json_out: Path = typer.Option(None, "--json", dir_okay=False, callback=existing_parent,
                                  help="Also write every report as JSON here."),
    course: Path = CourseOption,
) -> None:
    """List the pairs of submissions per exercise whose code is suspiciously
    alike (winnowing fingerprints; the stub and shipped code are ignored).
    A list to look at, never a verdict."""
    from grader.run.similarity import run_similarity

    check_class_folder(submissions)
    try:
        status = run_similarity(submissions, exercise or [], threshold, json_out, course)
    except ImportError as exc:   # copydetect comes with the [grader] extra
        typer.echo(f"grader similarity needs {exc.name or 'copydetect'}, which is not installed: "
                   "pip install -e '.[grader]' (scripts/setup.sh installs it)", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(status)


@app.command()
def adjust(
    student: str = typer.Argument(None, help="Student id (as in the gradebook)."),
    exercise: str = typer.Argument(None, help="Exercise id (01, 02, ...) or exam id."),
    points: float = typer.Option(None, "--points", help="Set the score to P points (0..max)."),
    delta: float = typer.Option(None, "--delta", help="Add D points to the graded score (negative takes off)."),
    clear: bool = typer.Option(False, "--clear", help="Withdraw the adjustment: the graded score stands again."),
    reason: str = typer.Option("", "--reason", help="Why (required; kept and exported)."),
    by: str = typer.Option(None, "--by", help="Who decides (default: the OS user)."),
    list_: bool = typer.Option(False, "--list", help="Show the history of adjustments and regrades (of STUDENT)."),
    db: Path = typer.Option(Path("grades.db"), "--db", exists=True, dir_okay=False, help="The gradebook."),
    course: Path = CourseOption,
) -> None:
    """Adjust one result by hand, with a reason; the history is kept (never
    an overwrite) and the newest adjustment is in effect in every export."""
    from grader.gradebook.session import run_adjust

    raise typer.Exit(run_adjust(db, course, student, exercise, points=points, delta=delta, clear=clear, reason=reason,
                                made_by=by, list_only=list_))


@app.command("sync-shipped")
def sync_shipped(course: Path = CourseOption) -> None:
    """Copy earlier exercises' references into the folders that ship them."""
    from grader.course import shipped_copies

    loaded = load_course(course, check_files=False)
    for source, copy in shipped_copies(loaded, course.resolve().parent):
        copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        typer.echo(f"{copy.relative_to(course.resolve().parent)} <- {source.relative_to(course.resolve().parent)}")


@app.command()
def doctor(course: Path = CourseOption,
           scheduler: str = typer.Option(None, "--scheduler", help="Check each worker of this Dask scheduler "
                                         "instead (e.g. tcp://10.0.0.5:8786) against this machine.")) -> None:
    """Show which sandbox layers work on this machine; warn about missing ones."""
    from grader.sandbox import Limits
    from grader.sandbox.doctor import diagnose

    try:
        limits = Limits.from_grading(load_course(course, check_files=False).grading)
    except CourseError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    if scheduler:
        report = _doctor_cluster(scheduler, limits, course)
    else:
        report = diagnose(limits)
    for line in report.lines:
        typer.echo(line)
    for problem in report.problems:
        typer.echo(f"warning: {problem}", err=True)
    if scheduler:
        typer.echo("cluster: every worker may grade" if report.ok else
                   f"cluster: {len(report.problems)} problem(s): grader grade --executor dask refuses to run")
    else:
        typer.echo("sandbox: all layers active" if report.ok else f"sandbox: {len(report.problems)} warning(s)")
    raise typer.Exit(0 if report.ok else 1)


def _doctor_cluster(scheduler: str, limits, course: Path):
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        typer.echo("error: --scheduler needs Dask: pip install 'attention-course[scale]'", err=True)
        raise typer.Exit(2)
    from grader.scale.cluster_doctor import diagnose_cluster
    from grader.scale.dask_executor import ClusterLost

    try:
        return diagnose_cluster(scheduler, limits, str(course.resolve()))
    except ClusterLost as exc:
        typer.echo(f"error: --scheduler: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    import sys

    from grader.sandbox.prestart import start_for

    start_for(sys.argv)  # no-op when grader/__main__.py did it already
    app()


# The sub-apps, each in its own module (grader/cli/release.py,
# grader/cli/exam.py, grader/cli/export.py).
app.add_typer(release_app, name="release")
app.add_typer(push_app, name="push")
app.add_typer(exam_app, name="exam")
app.add_typer(export_app, name="export")


# --- feedback hand-back (issue 15): one folder or zip per student; the work is in grader/report/handback.py
@app.command()
def feedback(
    out: Path = typer.Argument(..., help="Folder for the students' folders (or zips)."),
    db: Path = typer.Option(Path("grades.db"), "--db", help="The gradebook (written by grader grade)."),
    zipped: bool = typer.Option(False, "--zip", help="One <student>.zip each instead of a folder."),
    course: Path = CourseOption,
) -> None:
    """Write each student's feedback (page, figures, results in English and Chinese), ready to hand back."""
    from grader.report.handback import HandBackError, hand_back

    try:
        done = hand_back(release_course(course), db, out, zipped=zipped)
    except (HandBackError, OSError) as exc:
        typer.echo(f"feedback failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"{out}: feedback of {len(done.students)} student(s)" + (" as zips" if zipped else ""))
