"""``grader selftest`` and ``grader check``: the course's proofs, from the
command line's options to a table on the terminal and an exit status. Kept
apart from grader/cli/ so that the CLI only parses options."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from grader.course import CourseError, load_course

EXIT_BAD_INPUT = 2


def run_selftest(course_path: Path, exercise_ids: list[str]) -> int:
    """The public tests against each reference, stub and pitfall variant:
    0 when every promise holds, 1 when one does not, 2 for bad input."""
    from grader.proofs.selftest import check_exercises

    try:
        # Only the named exercises must be complete; the others may be work in progress.
        course = load_course(course_path, check_files=False)
        chosen = [course.exercise(i) for i in exercise_ids] if exercise_ids else course.exercises
    except (CourseError, KeyError) as exc:
        print(str(exc).strip("'\""), file=sys.stderr)
        return EXIT_BAD_INPUT
    with tempfile.TemporaryDirectory(prefix="selftest-") as workdir:
        reports = check_exercises(course, chosen, Path(workdir), root=course_path.resolve().parent)
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
    return 1 if problems else 0


def run_check(course_path: Path, exercise_ids: list[str], json_path: Path | None) -> int:
    """References, stubs and pitfall variants through the hidden checks, as a
    matrix (also as JSON at ``json_path``): 0 when every row keeps the
    promise, 1 when one does not, 2 for bad input."""
    from grader.judge import Judge
    from grader.proofs.check_matrix import check_course, rows_as_json
    from grader.sandbox import Limits, Sandbox

    try:
        course = load_course(course_path)
        chosen = [course.exercise(i) for i in exercise_ids] if exercise_ids else course.exercises
    except (CourseError, KeyError) as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    limits = Limits(**course.grading.model_dump())
    with tempfile.TemporaryDirectory(prefix="check-") as workdir, Sandbox(limits) as sandbox:
        rows = check_course(course, chosen, Judge(course, sandbox, course_path.resolve().parent), Path(workdir))
    table = Table("exercise", "case", "points", "status", "hints", "")
    for row in rows:
        table.add_row(row.exercise, row.case, f"{row.points:g}/{row.max_points:g}", row.status,
                      ", ".join(row.hints[:3]) + (" …" if len(row.hints) > 3 else ""),
                      "[green]ok[/green]" if row.ok else f"[red]{row.problem}[/red]")
    Console().print(table)
    if json_path:
        json_path.write_text(json.dumps(rows_as_json(rows), indent=1), encoding="utf-8")
    failed = [row for row in rows if not row.ok]
    print(f"{len(rows) - len(failed)}/{len(rows)} rows keep the promise")
    return 1 if failed else 0
