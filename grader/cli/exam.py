"""``grader exam ...``: the exam commands (a typer sub-app mounted by
grader/cli/app.py); the work is done in grader/exams/."""
from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from grader.cli.input_checks import CourseOption, default_jobs
from grader.course import CourseError, load_course

exam_app = typer.Typer(help="Exams: per-student variants, building, grading.", no_args_is_help=True)

EXIT_BAD_INPUT, EXIT_GRADER_BROKEN = 2, 3


def _load(course_path: Path, exam_id: str, *, check_files: bool = False):
    """(course, exam, root) or exit 2 with the reason."""
    try:
        course = load_course(course_path, check_files=check_files)
        return course, course.exam(exam_id), course_path.resolve().parent
    except (CourseError, KeyError) as exc:
        typer.echo(str(exc).strip("'\""), err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from exc


def _secret(course, root: Path) -> bytes:
    from grader.exams.variants import ExamSecretError, load_secret

    try:
        return load_secret(course, root)
    except ExamSecretError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from exc


@exam_app.command("init-secret")
def init_secret(course: Path = CourseOption,
                force: bool = typer.Option(False, "--force", help="Replace an existing secret (changes every variant!).")) -> None:
    """Create the exam secret file named in course.yaml (mode 600)."""
    from grader.exams.variants import new_secret

    loaded = load_course(course, check_files=False)
    if not loaded.exam_settings.secret_file:
        typer.echo("course.yaml names no exam_settings.secret_file; set $" + loaded.exam_settings.secret_env, err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    path = Path(loaded.exam_settings.secret_file).expanduser()
    path = path if path.is_absolute() else course.resolve().parent / path
    if path.exists() and not force:
        typer.echo(f"{path} exists; variants already built from it would change (use --force to replace it)", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(new_secret() + "\n")
    typer.echo(f"wrote {path} (keep it; never commit it)")


@exam_app.command("variant")
def variant(exam_id: str = typer.Argument(..., help="Exam id (course.yaml exams)."),
            student: str = typer.Argument(..., help="Student id."),
            key: bool = typer.Option(True, "--key/--no-key", help="Also compute the answer key (runs the references)."),
            as_json: bool = typer.Option(False, "--json", help="Print JSON."),
            course: Path = CourseOption) -> None:
    """Reproduce one student's variant (sizes, parameters, choice orders) and answer key."""
    from grader.exams.questions import answer_keys, shown_questions
    from grader.exams.variants import make_variant

    loaded, exam, root = _load(course, exam_id)
    drawn = make_variant(loaded, exam, student, _secret(loaded, root))
    keys = answer_keys(loaded, exam, [drawn], root)[student] if key else {}
    if as_json:
        typer.echo(json.dumps({**drawn.to_dict(), "answers": {q: k.display() for q, k in keys.items()}}, indent=1))
        return
    typer.echo(f"{exam.id} · {student} · hidden seed {drawn.seed} · public seed {drawn.public_seed}")
    typer.echo("sizes: " + ", ".join(f"{k}={v}" for k, v in drawn.sizes.items()))
    for question in shown_questions(loaded, exam, drawn):
        typer.echo(f"{question.number:>2}. {question.id:<36} {keys[question.id].display() if key else ''}"
                   + (f"   {drawn.params[question.id]}" if question.id in drawn.params else ""))


@exam_app.command("build")
def build(exam_id: str = typer.Argument(..., help="Exam id (course.yaml exams)."),
          roster: Path = typer.Option(..., "--roster", exists=True, dir_okay=False, help="CSV with a student_id column."),
          out: Path = typer.Option(..., "--out", help="Where the students' folders go."),
          nbgrader: Path = typer.Option(None, "--nbgrader", file_okay=False,
                                        help="Also an nbgrader course directory: one assignment <exam>-<student> each."),
          exchange: Path = typer.Option(None, "--exchange", help="With --nbgrader: Exchange.root in its nbgrader_config.py."),
          course: Path = CourseOption) -> None:
    """One folder per student: stubs, public tests with their sizes, questions, answers.yaml."""
    from grader.exams.build import RosterError, read_roster
    from grader.exams.build_class import build_exam
    from grader.release.common import ReleaseError

    loaded, exam, root = _load(course, exam_id)
    try:
        entries = read_roster(roster)
    except RosterError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from exc
    try:
        variants = build_exam(loaded, exam, entries, _secret(loaded, root), out, root, nbgrader=nbgrader,
                              exchange=exchange)
    except (ReleaseError, ImportError) as exc:      # ImportError: nbformat (the release extra) is missing
        typer.echo(f"nbgrader assignments not written: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from exc
    typer.echo(f"built {len(variants)} exam folder(s) in {out}; instructor's record: {out / '_instructor'}")
    if nbgrader is not None:
        from grader.exams.nbgrader import assignment_name

        first = assignment_name(exam.id, variants[0].student) if variants else f"{exam.id}-<student>"
        typer.echo(f"nbgrader: {len(variants)} assignment(s) in {nbgrader / 'source'}; "
                   f"next: cd {nbgrader} && nbgrader generate_assignment {first} (one per student)")


@exam_app.command("grade")
def grade(exam_id: str = typer.Argument(..., help="Exam id (course.yaml exams)."),
          submissions: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of <student>/ or <student>.zip."),
          out: Path = typer.Option(Path("exam-grading"), "--out", help="Where results.json, grades.csv, stats.json, report.html go."),
          roster: Path = typer.Option(None, "--roster", exists=True, dir_okay=False, help="Roster CSV (extra time, absentees)."),
          timestamps: Path = typer.Option(None, "--timestamps", exists=True, dir_okay=False,
                                          help="CSV student_id,submitted_at[,started_at] from the collection system."),
          answers_only: bool = typer.Option(False, "--answers-only", help="Grade the questions only (no sandbox needed)."),
          jobs: int = typer.Option(default_jobs(), "--jobs", "-j", min=1,
                                   help="Students graded at once (code; default: one more than the cores)."),
          db: Path = typer.Option(Path("grades.db"), "--db", dir_okay=False, help="The SQLite gradebook (created if missing): "
                                  "results are recorded there, and a rerun grades only what is missing."),
          trust_file_times: bool = typer.Option(
              False, "--trust-file-times",
              help="Without a recorded submission time (--timestamps, .submission.json, nbgrader's timestamp.txt), "
                   "judge lateness by the newest file time, which students can set. Default: lateness unknown."),
          course: Path = CourseOption) -> None:
    """Grade an exam's answers and code, each student with their variant; apply the late policy."""
    from grader.exams.session import run_exam_grading
    from grader.cli.input_checks import check_class_folder

    check_class_folder(submissions)
    raise typer.Exit(run_exam_grading(exam_id, submissions, out=out, course_path=course, jobs=jobs, roster=roster,
                                      timestamps=timestamps, answers_only=answers_only, db=db,
                                      trust_file_times=trust_file_times))
