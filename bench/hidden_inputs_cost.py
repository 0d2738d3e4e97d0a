"""What hidden inputs drawn per submission cost (grader/checks/inputs.py).

    python bench/hidden_inputs_cost.py [-n 60] [-e 01 -e 03] [--repeat 3] [--jobs 2]
    python bench/hidden_inputs_cost.py --quick      # 12 submissions of 01, once

One class, graded in this process by `grade_class` with one sandbox
(fork-server), alternately by a judge on the fixed inputs (the grader
before per-submission inputs: the reference and the pitfall variants run
once per exercise) and by one that draws each submission's inputs from a
grading secret (the reference runs once per distinct submission, the
variants once per distinct failing one). Each run gets a fresh judge and
gradebook, as a `grader grade` invocation would. Every student's file is
their own (a comment with their name), as in a real class; untouched stubs
are the same bytes for everyone, and so share their inputs.

Prints each pair's times, their ratio and the median ratio, and the seeded
reference and variant runs the per-submission judge made.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.checks.inputs import HiddenInputs  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.gradebook import Gradebook  # noqa: E402
from grader.judge import Judge  # noqa: E402
from grader.run.grading import grade_class  # noqa: E402
from grader.sandbox import Limits, Sandbox  # noqa: E402


def make_class(exercises, n: int, out: Path) -> dict[str, int]:
    """N students; student i hands in, per exercise, kind i of: reference
    (twice as often), each pitfall variant, the untouched stub. Returns the count per kind."""
    kinds: dict[str, int] = {}
    for exercise in exercises:
        reference = (REPO / "solutions" / exercise.folder / exercise.module).read_text()
        stub = (REPO / "exercises" / exercise.folder / exercise.module).read_text()
        pool = [("reference", reference), ("reference", reference),
                *(("variant", v.source) for v in load_variants(exercise, REPO).values()), ("stub", stub)]
        for i in range(n):
            kind, source = pool[i % len(pool)]
            folder = out / f"s{i:03d}" / exercise.folder
            folder.mkdir(parents=True, exist_ok=True)
            # Each student's own bytes (a stub is left untouched: the same for all).
            (folder / exercise.module).write_text(source if kind == "stub" else f"{source}\n# s{i:03d}\n")
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def grade_once(course, exercises, class_dir: Path, sandbox, inputs: HiddenInputs | None, jobs: int,
               work: Path) -> tuple[float, Judge, dict]:
    judge = Judge(course, sandbox, REPO, inputs)
    with Gradebook(work / "grades.db") as book:
        start = time.perf_counter()
        run = grade_class(course, exercises, class_dir, book, judge, work / "work", jobs=jobs)
        elapsed = time.perf_counter() - start
        points = {(r.key.student, r.key.exercise): r.points for r in book.records(course.course.version)}
    assert run.graded > 0
    return elapsed, judge, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=60, help="students (default 60)")
    parser.add_argument("-e", "--exercise", action="append", help="exercise ids (default 01 and 03)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating pairs of runs (default 3)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="12 students of 01, one pair")
    args = parser.parse_args()
    if args.quick:
        args.n, args.exercise, args.repeat = 12, ["01"], 1
    course = load_course(REPO / "course.yaml")
    exercises = [course.exercise(e) for e in (args.exercise or ["01", "03"])]
    inputs = HiddenInputs(os.urandom(32))
    ratios = []
    with tempfile.TemporaryDirectory(prefix="hidden-inputs-bench-") as tmp, \
            Sandbox(Limits(**course.grading.model_dump())) as sandbox:
        tmp_path = Path(tmp)
        kinds = make_class(exercises, args.n, tmp_path / "class")
        print(f"{args.n} students x {', '.join(e.id for e in exercises)}: {kinds}; jobs {args.jobs}")
        grade_once(course, exercises, tmp_path / "class", sandbox, None, args.jobs, tmp_path / "warm")  # warm-up
        for k in range(args.repeat):
            fixed, _, fixed_points = grade_once(course, exercises, tmp_path / "class", sandbox, None, args.jobs,
                                                tmp_path / f"fixed{k}")
            seeded, judge, seeded_points = grade_once(course, exercises, tmp_path / "class", sandbox, inputs,
                                                      args.jobs, tmp_path / f"seeded{k}")
            ratios.append(seeded / fixed)
            runs = judge.input_sets.runs
            # A buggy file whose bug shows on some draws only may score otherwise on its own inputs.
            moved = sorted(f"{s}/{e}" for (s, e), p in seeded_points.items() if p != fixed_points.get((s, e)))
            print(f"pair {k + 1}: fixed inputs {fixed:.2f} s, per-submission inputs {seeded:.2f} s, "
                  f"ratio {seeded / fixed:.2f}; seeded reference runs {runs['reference']}, "
                  f"seeded variant runs {runs['variants']}, second runs on fixed inputs {runs['submission']}, "
                  f"runs measuring an undecided figure again {runs['measured again']}; "
                  f"results scored otherwise: {len(moved)} {moved[:6]}")
    print(f"median ratio (per-submission / fixed): {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
