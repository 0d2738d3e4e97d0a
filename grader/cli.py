"""The ``grader`` command."""
from __future__ import annotations

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


@app.command("sync-shipped")
def sync_shipped(course: Path = CourseOption) -> None:
    """Copy earlier exercises' references into the folders that ship them."""
    from grader.course import shipped_copies

    loaded = load_course(course, check_files=False)
    for source, copy in shipped_copies(loaded, course.resolve().parent):
        copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        typer.echo(f"{copy.relative_to(course.resolve().parent)} <- {source.relative_to(course.resolve().parent)}")


@app.command()
def doctor(course: Path = CourseOption) -> None:
    """Show which sandbox layers work on this machine; warn about missing ones."""
    from grader.sandbox import Limits
    from grader.sandbox.doctor import diagnose

    try:
        limits = Limits.from_grading(load_course(course, check_files=False).grading)
    except CourseError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    report = diagnose(limits)
    for line in report.lines:
        typer.echo(line)
    for problem in report.problems:
        typer.echo(f"warning: {problem}", err=True)
    typer.echo("sandbox: all layers active" if report.ok else f"sandbox: {len(report.problems)} warning(s)")
    raise typer.Exit(0 if report.ok else 1)


def main() -> None:
    app()
