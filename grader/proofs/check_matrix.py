"""``grader check``: the hidden checks' promise, proven on our own code.

For each exercise: the reference scores full marks, the untouched stub
scores zero, and every pitfall variant loses points and is told about its
own pitfall by a check that declares it (not only by matching the variant's
own results, which would be circular), and is confirmed as itself and as
no other pitfall (its outputs are its own mistake's).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.judge import ExerciseResult, Judge
from grader.course.pitfalls import load_variants
from grader.intake.submissions import assemble


@dataclass
class MatrixRow:
    exercise: str
    case: str                  # "reference", "stub" or "variant:<pitfall id>"
    points: float
    max_points: float
    status: str
    hints: list[str] = field(default_factory=list)
    problem: str = ""          # empty when the row keeps the promise

    @property
    def ok(self) -> bool:
        return not self.problem


def _declared_hints(judge: Judge, exercise: Exercise, result: ExerciseResult) -> set[str]:
    by_id = {check.id: check for check in judge.plan(exercise).checks}
    return {p for v in result.verdicts if not v.passed for p in by_id[v.check_id].pitfalls}


def _row(exercise: Exercise, case: str, result: ExerciseResult, problem: str) -> MatrixRow:
    return MatrixRow(exercise.folder, case, result.points, result.max_points, result.status, result.pitfalls, problem)


def check_exercise(judge: Judge, exercise: Exercise, workdir: Path, root: Path = REPO_ROOT) -> list[MatrixRow]:
    if not judge.plan(exercise).checks:
        return [MatrixRow(exercise.folder, "checks", 0, exercise.points, "no_checks", [], "no hidden checks defined")]
    rows = []
    reference_source = (root / "solutions" / exercise.folder / exercise.module).read_bytes()
    reference_folder = assemble(exercise, reference_source, workdir / f"check-{exercise.id}-reference", judge.course, root)
    reference = judge.grade(exercise, reference_folder, workdir)
    rows.append(_row(exercise, "reference", reference,
                     "" if reference.points >= exercise.points - 1e-9 else f"reference scores {reference.points:g}"))
    stub = judge.grade(exercise, root / "exercises" / exercise.folder, workdir)
    rows.append(_row(exercise, "stub", stub, "" if stub.points == 0 else f"stub scores {stub.points:g}"))
    for pitfall_id, variant in sorted(load_variants(exercise, root).items()):
        folder = assemble(exercise, variant.source.encode(), workdir / f"check-{exercise.id}-{pitfall_id}",
                          judge.course, root)
        result = judge.grade(exercise, folder, workdir, variant=pitfall_id)   # its run, once: graded and compared
        if result.points >= exercise.points - 1e-9:
            problem = "loses no points"
        elif pitfall_id not in _declared_hints(judge, exercise, result):
            problem = f"no failed check declares {pitfall_id}"
        elif (named := {p for v in result.verdicts if not v.passed for p in v.confirmed}) != {pitfall_id}:
            # Its results are its own: it is confirmed as itself, and as no other (issue 31).
            problem = f"confirmed as {', '.join(sorted(named)) or 'nothing'}"
        else:
            problem = ""
        rows.append(_row(exercise, f"variant:{pitfall_id}", result, problem))
    return rows


def check_course(course: Course, exercises: list[Exercise], judge: Judge, workdir: Path,
                 root: Path = REPO_ROOT) -> list[MatrixRow]:
    return [row for exercise in exercises for row in check_exercise(judge, exercise, workdir, root)]


def rows_as_json(rows: list[MatrixRow]) -> list[dict]:
    return [asdict(row) | {"ok": row.ok} for row in rows]
