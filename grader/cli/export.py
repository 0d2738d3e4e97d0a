"""``grader export ...``: grades for an LMS (long and wide CSV, Canvas,
Moodle) and the course for Gradescope (a typer sub-app mounted by
grader/cli/app.py; the work is done in grader/report/ and grader/scale/)."""
from __future__ import annotations

from pathlib import Path

import typer

from grader.cli.input_checks import CourseOption, check_ids, existing_parent
from grader.course import CourseError, load_course
from grader.intake.names import visible

PartialOption = typer.Option(False, "--allow-partial", help="Export although some students have results only "
                             "under an older course version (they are left out).")
AllAssignmentsOption = typer.Option(False, "--all-assignments", help="A column for every assignment, also those "
                                    "with no result yet (an LMS import would create them empty).")

export_app = typer.Typer(help="Export grades for an LMS, or the course to other graders.", no_args_is_help=True)


def _release_course(course: Path):
    """The course, its files unchecked (exports need only its model), or exit 2."""
    try:
        return load_course(course, check_files=False)
    except CourseError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc


@export_app.command("csv")
def export_csv(
    out: Path = typer.Argument(..., dir_okay=False, callback=existing_parent, help="The CSV file to write."),
    db: Path = typer.Option(Path("grades.db"), "--db", exists=True, dir_okay=False, help="The gradebook."),
    wide: bool = typer.Option(False, "--wide", help="One row per student: a column per exercise and exam "
                              "(blank: not handed in), the total (weighted by course.yaml's weights) and the max."),
    allow_partial: bool = PartialOption,
    course: Path = CourseOption,
) -> None:
    """Grades from the gradebook for LMS upload (the newest result of each
    student and exercise for this course version)."""
    from grader.report.exports import write_grades_csv
    from grader.report.lms import write_wide_csv

    loaded, records = _exported_records(course, db, allow_partial)
    (write_wide_csv(records, out, loaded) if wide else write_grades_csv(records, out))
    typer.echo(f"{out}: {len({r.key.student for r in records})} students, {len(records)} results")


def _exported_records(course: Path, db: Path, partial: bool = False):
    """(course, the gradebook's final records: adjusted, late policy applied,
    each exam once by its total) or exit 2 with the reason. Students graded
    only under an older course version would be missing from an upload (an
    LMS blanks their grades): refused unless ``partial``."""
    from grader.exams.records import is_exam_part
    from grader.gradebook import Gradebook, GradebookError

    try:
        loaded = load_course(course, check_files=False)
        with Gradebook(db) as book:
            records = list(book.records(loaded.course.version))
            behind = book.left_behind(loaded.course.version)
    except (CourseError, GradebookError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    if behind:
        lines = [f"  {visible(student, 64)}: only under course version {', '.join(versions)}"
                 for student, versions in sorted(behind.items())]
        typer.echo("\n".join([f"{len(behind)} student(s) have results only under another course version than "
                              f"{loaded.course.version!r} (course.yaml):", *lines[:20],
                              *([f"  ... and {len(lines) - 20} more"] if len(lines) > 20 else []),
                              "regrade them (grader grade), or export this version's students alone with "
                              "--allow-partial"]), err=not partial)
        if not partial:
            raise typer.Exit(2)
    return loaded, [r for r in records if not is_exam_part(loaded, r.key.exercise)]


@export_app.command("canvas")
def export_canvas(
    out: Path = typer.Argument(..., dir_okay=False, callback=existing_parent, help="The CSV file to write."),
    db: Path = typer.Option(Path("grades.db"), "--db", exists=True, dir_okay=False, help="The gradebook."),
    id_column: str = typer.Option("sis_user_id", "--id-column", help="Where our student ids go: sis_user_id, "
                                  "sis_login_id or id (Canvas's own user id)."),
    allow_partial: bool = PartialOption,
    all_assignments: bool = AllAssignmentsOption,
    course: Path = CourseOption,
) -> None:
    """Canvas's gradebook import CSV: a column per assignment and exam, a
    Points Possible row; blank cells for work not handed in."""
    from grader.report.lms import CANVAS_IDS, write_canvas_csv

    check_ids("--id-column", [id_column], list(CANVAS_IDS), where="Canvas's identifier columns")
    loaded, records = _exported_records(course, db, allow_partial)
    typer.echo(f"{out}: {write_canvas_csv(records, loaded, out, id_column, all_assignments)} students (Canvas: Grades > Import)")


@export_app.command("moodle")
def export_moodle(
    out: Path = typer.Argument(..., dir_okay=False, callback=existing_parent, help="The CSV file to write."),
    db: Path = typer.Option(Path("grades.db"), "--db", exists=True, dir_okay=False, help="The gradebook."),
    id_column: str = typer.Option("idnumber", "--id-column", help="What our student ids are in Moodle: idnumber, "
                                  "email or username (map it to the same field at import)."),
    allow_partial: bool = PartialOption,
    all_assignments: bool = AllAssignmentsOption,
    course: Path = CourseOption,
) -> None:
    """Moodle's CSV grade import: an identifier column and a column per
    assignment and exam; blank cells for work not handed in."""
    from grader.report.lms import MOODLE_IDS, MOODLE_MAP_TO, write_moodle_csv

    check_ids("--id-column", [id_column], list(MOODLE_IDS), where="Moodle's user fields")
    loaded, records = _exported_records(course, db, allow_partial)
    typer.echo(f"{out}: {write_moodle_csv(records, loaded, out, id_column, all_assignments)} students (Moodle: Grade administration > "
               f"Import > CSV file; map '{MOODLE_IDS[id_column]}' to {MOODLE_MAP_TO[id_column]})")


@export_app.command("gradescope")
def export_gradescope(
    out: Path = typer.Argument(..., callback=existing_parent,
                               help="The autograder zip to write (instructor-only: it holds the references)."),
    assignment: str = typer.Option(None, "--assignment", help="Only this assignment's exercises (default: all)."),
    exercise: list[str] = typer.Option(None, "--exercise", "-e", help="Only these exercises (repeatable)."),
    visibility: str = typer.Option("visible", "--visibility", help="visible, after_published, after_due_date or hidden."),
    course: Path = CourseOption,
) -> None:
    """Write a Gradescope autograder zip (setup.sh, run_autograder, the course)."""
    from grader.scale.gradescope import write_gradescope_zip

    loaded = _release_course(course)
    try:
        chosen = list(loaded.exercises)
        if assignment:
            chosen = [loaded.exercise(i) for a in loaded.assignments if a.id == assignment for i in a.exercises]
        if exercise:
            chosen = [loaded.exercise(i) for i in exercise]
        if not chosen:
            raise KeyError(assignment)
        names = write_gradescope_zip(loaded, course.resolve().parent, out, chosen, visibility=visibility)
    except (KeyError, ValueError) as exc:
        typer.echo(f"export failed: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{out}: {len(names)} files; grades {', '.join(e.folder for e in chosen)}. "
               "Upload it as the assignment's autograder; never give it to students.")
