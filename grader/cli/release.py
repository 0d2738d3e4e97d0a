"""``grader release ...`` and ``grader push ...`` (issue 6): the students'
repository, the nbgrader course, pushing scores. Typer sub-apps mounted by
grader/cli/app.py; the work is done in grader/release/."""
from __future__ import annotations

from pathlib import Path

import typer

from grader.cli.input_checks import CourseOption, check_ids
from grader.course import CourseError, load_course

release_app = typer.Typer(help="Release the course: students' repository, nbgrader course.", no_args_is_help=True)
push_app = typer.Typer(help="Push the gradebook's scores to other systems.", no_args_is_help=True)


def release_course(course: Path):
    """The course for a release: files are checked per exercise (the course
    lists exercises before they are written; only written ones are released)."""
    try:
        return load_course(course, check_files=False)
    except CourseError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc


@release_app.command("student")
def release_student(
    out: Path = typer.Argument(..., help="Folder for the students' repository."),
    through: str = typer.Option(None, "--through", help="Release the assignments up to this one (course.yaml order), "
                                "or 'all'. Required when the course has several assignments."),
    notebooks: bool = typer.Option(True, "--notebooks/--no-notebooks", help="Also write NN_slug.ipynb beside each stub."),
    force: bool = typer.Option(False, "--force", help="Replace an earlier release in OUT (its .git is kept)."),
    course: Path = CourseOption,
) -> None:
    """Write the repository students clone, and check it leaks nothing.

    Later exercises ship earlier ones' solutions as working code, so each
    release goes up to an assignment, published once those before it are over."""
    from grader.release.student_repo import ALL, publish_student_repo

    loaded, root = release_course(course), course.resolve().parent
    if through is None:
        if len(loaded.assignments) > 1:
            choices = "\n".join(f"  --through {a.id:<14} {', '.join(a.exercises)}" for a in loaded.assignments)
            typer.echo(f"choose how far to release (the assignments up to the one named):\n{choices}\n"
                       f"  --through {ALL:<14} every exercise", err=True)
            raise typer.Exit(2)
        through = ALL
    check_ids("--through", [through], [a.id for a in loaded.assignments], also=(ALL,))
    raise typer.Exit(publish_student_repo(loaded, root, out, notebooks=notebooks, force=force, through=through))


@release_app.command("nbgrader")
def release_nbgrader(
    out: Path = typer.Argument(..., help="The nbgrader course directory (source/ and nbgrader_config.py are written)."),
    assignments: list[str] = typer.Option(None, "--assignment", "-a", help="Only these assignments (default: all)."),
    exchange: Path = typer.Option(None, "--exchange", help="Write Exchange.root into nbgrader_config.py."),
    course: Path = CourseOption,
) -> None:
    """Generate nbgrader's source notebooks and config from course.yaml."""
    from grader.release.common import ReleaseError
    from grader.release.nbgrader import write_course

    loaded = release_course(course)
    check_ids("--assignment", assignments or [], [a.id for a in loaded.assignments])
    try:
        release = write_course(loaded, course.resolve().parent, out, assignment_ids=assignments, exchange=exchange)
    except (ReleaseError, ImportError) as exc:
        typer.echo(f"release failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    for assignment, folders in release.assignments.items():
        skipped = release.skipped[assignment]
        typer.echo(f"source/{assignment}: {', '.join(folders) or 'no notebook'}"
                   + (f" (not written yet: {', '.join(skipped)})" if skipped else ""))
    typer.echo(f"next: cd {out} && nbgrader generate_assignment <assignment>")


@push_app.command("nbgrader")
def push_nbgrader(
    assignment: str = typer.Argument(..., help="The assignment id (course.yaml assignments)."),
    db: Path = typer.Option(Path("grades.db"), "--db", exists=True, dir_okay=False,
                            help="Our gradebook (written by grader grade)."),
    # Must exist: nbgrader creates it (generate_assignment); a typo must not start an empty one.
    nbgrader_db: Path = typer.Option(Path("gradebook.db"), "--nbgrader-db", exists=True, dir_okay=False,
                                     help="nbgrader's gradebook (the course directory's gradebook.db)."),
    course: Path = CourseOption,
) -> None:
    """Write our scores into nbgrader's gradebook so formgrader shows them."""
    from grader.release.common import ReleaseError
    from grader.release.nbgrader import next_steps, push_scores

    loaded = release_course(course)
    check_ids("ASSIGNMENT", [assignment], [a.id for a in loaded.assignments])
    try:
        report = push_scores(loaded, db, nbgrader_db, assignment, course.resolve().parent)
    except ImportError as exc:   # nbgrader comes with the [release] extra
        typer.echo(f"push needs {exc.name or 'nbgrader'}, which is not installed: pip install -e '.[release]' "
                   "(scripts/setup.sh installs it)", err=True)
        raise typer.Exit(2) from None
    except ReleaseError as exc:
        typer.echo(f"push failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    from grader.intake.names import visible

    for line in report.skipped:
        typer.echo(f"skipped {visible(line, 300)}", err=True)  # may name students: control bytes shown, not sent
    typer.echo(f"{nbgrader_db}: {report.notebooks} notebook score(s) of {report.students} student(s) pushed")
    steps, warnings = next_steps(nbgrader_db.resolve().parent, assignment)
    for line in warnings:
        typer.echo(line, err=True)
    typer.echo("\n".join(steps))
