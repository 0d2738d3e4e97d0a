"""The ``grader`` command."""
from __future__ import annotations

import os
from pathlib import Path

import typer

from grader.course import DEFAULT_COURSE_FILE, CourseError, load_course

app = typer.Typer(help="Grade the attention & Transformers course.", no_args_is_help=True, add_completion=False)



@app.callback()
def _root() -> None:
    """Grade the attention & Transformers course."""


CourseOption = typer.Option(DEFAULT_COURSE_FILE, "--course", help="Path to course.yaml.")


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
    import tempfile

    from rich.console import Console
    from rich.table import Table

    from grader.selftest import check_exercises

    try:
        # Only the named exercises must be complete; the others may be work in progress.
        loaded = load_course(course, check_files=False)
        chosen = [loaded.exercise(i) for i in exercise_ids] if exercise_ids else loaded.exercises
    except (CourseError, KeyError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    with tempfile.TemporaryDirectory(prefix="selftest-") as workdir:
        reports = check_exercises(loaded, chosen, Path(workdir), root=course.resolve().parent)
    table = Table("exercise", "reference", "stub", "variants caught", "hidden-only")
    for report in reports:
        caught = sum(not problems for pid, problems in report.variants.items() if pid not in report.hidden_only)
        shown = len(report.variants) - len(report.hidden_only)
        table.add_row(report.exercise.folder, "ok" if not report.reference else "FAIL",
                      "ok" if not report.stub else "FAIL", f"{caught}/{shown}", str(len(report.hidden_only)))
    console = Console()
    console.print(table)
    problems = [p for report in reports for p in report.problems]
    for problem in problems:
        console.print(f"[red]✗[/red] {problem}", markup=True, highlight=False)
    raise typer.Exit(1 if problems else 0)


@app.command()
def check(
    exercise_ids: list[str] = typer.Argument(None, help="Exercise ids (01, 02, ...); default: all."),
    course: Path = CourseOption,
    json_path: Path = typer.Option(None, "--json", help="Also write the matrix as JSON."),
) -> None:
    """Run references, stubs and pitfall variants through the hidden checks."""
    import json
    import tempfile

    from rich.console import Console
    from rich.table import Table

    from grader.check_matrix import check_course, rows_as_json
    from grader.judge import Judge
    from grader.sandbox import Limits, Sandbox

    try:
        loaded = load_course(course)
        chosen = [loaded.exercise(i) for i in exercise_ids] if exercise_ids else loaded.exercises
    except (CourseError, KeyError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    limits = Limits(**loaded.grading.model_dump())
    with tempfile.TemporaryDirectory(prefix="check-") as workdir, Sandbox(limits) as sandbox:
        rows = check_course(loaded, chosen, Judge(loaded, sandbox, course.resolve().parent), Path(workdir))
    table = Table("exercise", "case", "points", "status", "hints", "")
    for row in rows:
        table.add_row(row.exercise, row.case, f"{row.points:g}/{row.max_points:g}", row.status,
                      ", ".join(row.hints[:3]) + (" …" if len(row.hints) > 3 else ""),
                      "[green]ok[/green]" if row.ok else f"[red]{row.problem}[/red]")
    Console().print(table)
    if json_path:
        json_path.write_text(json.dumps(rows_as_json(rows), indent=1), encoding="utf-8")
    failed = [row for row in rows if not row.ok]
    typer.echo(f"{len(rows) - len(failed)}/{len(rows)} rows keep the promise")
    raise typer.Exit(1 if failed else 0)


@app.command()
def grade(
    submissions: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of <student_id>/ folders or .zip files."),
    out: Path = typer.Option(Path("grading"), "--out", help="Where grades.csv, results.json and report/ go."),
    db: Path = typer.Option(Path("grades.db"), "--db", help="The SQLite gradebook (created if missing)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1, help="Submissions graded at once."),
    timeout: float = typer.Option(None, "--timeout", help="Seconds per submission and exercise (default: course.yaml)."),
    memory: int = typer.Option(None, "--memory", help="MiB per sandboxed run (default: course.yaml)."),
    assignment: str = typer.Option(None, "--assignment", help="Grade only this assignment's exercises."),
    course: Path = CourseOption,
) -> None:
    """Grade a class into the gradebook and write the reports.

    Exits 0 when grading completed (whatever the students scored), non-zero
    only when the grader could not do its job."""
    from grader.session import run_grading

    raise typer.Exit(run_grading(submissions, out=out, db=db, jobs=jobs, timeout=timeout, memory=memory,
                                 assignment=assignment, course_path=course))


@app.command("sync-shipped")
def sync_shipped(course: Path = CourseOption) -> None:
    """Copy earlier exercises' references into the folders that ship them."""
    from grader.course import shipped_copies

    loaded = load_course(course, check_files=False)
    for source, copy in shipped_copies(loaded, course.resolve().parent):
        copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        typer.echo(f"{copy.relative_to(course.resolve().parent)} <- {source.relative_to(course.resolve().parent)}")


def main() -> None:
    app()


# ---------------------------------------------------------------- exams (issue 8)
from grader.exams.cli import exam_app  # noqa: E402  (the sub-app; its commands live with the exam code)

app.add_typer(exam_app, name="exam")
