"""How often a reference's own measured figure could not tell, under load.

The reference of each exercise is graded K times as a submission, on a
judge whose kept reference run (the figures it is compared with) was made
on a quiet machine, while H processes of torch work load the cores (as a
class being graded beside other jobs does). It prints, per exercise, how
often the first figure of a measured check (CPU time, grader/checks/work.py)
decided nothing, how often the grade was still short after measuring it
again beside the reference (grader/remeasure.py), the worst figure's share
of its pass line, and what measuring again cost.

    python bench/undecided_figures.py -e 14 -e 16 -e 18 -k 12 --hogs 4
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grader.checks.work as work  # noqa: E402
from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.intake.submissions import assemble  # noqa: E402
from grader.judge import Judge  # noqa: E402
from grader.sandbox import Limits, Sandbox  # noqa: E402

HOG = ("import time, torch\ntorch.set_num_threads(1)\na = torch.randn(1500, 1500)\n"
       "while True:\n    a @ a\n    torch.randn(4_000_000).sort()\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-e", "--exercise", action="append", default=None, help="exercise id (default 14, 16, 18)")
    parser.add_argument("-k", type=int, default=12, help="grades of each reference")
    parser.add_argument("--hogs", type=int, default=4, help="processes of torch work beside the grading")
    args = parser.parse_args()
    course = load_course()
    figures: list[tuple[str, float]] = []
    real = work.verdict

    def logged(spent, cheap, full):
        answer = real(spent, cheap, full)
        line = math.sqrt(cheap * full) / work.MARGIN if cheap and full else math.nan
        figures.append((answer, (spent or 0.0) / line))
        return answer

    work.verdict = logged
    for exercise_id in args.exercise or ["14", "16", "18"]:
        exercise = course.exercise(exercise_id)
        source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
        with Sandbox(Limits(**course.grading.model_dump())) as box, tempfile.TemporaryDirectory() as tmp:
            judge = Judge(course, box)
            judge.expected(exercise, Path(tmp))   # the kept reference run, on a quiet machine
            hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
            try:
                first_undecided = short = 0
                worst, start = 0.0, time.perf_counter()
                for k in range(args.k):
                    figures.clear()
                    again = judge.input_sets.runs["measured again"]
                    result = judge.grade(exercise, assemble(exercise, source, Path(tmp) / f"s{k}", course),
                                         Path(tmp) / "work")
                    first_undecided += judge.input_sets.runs["measured again"] > again
                    short += result.points < result.max_points - 1e-9
                    worst = max([worst, *(share for _, share in figures)])
                elapsed = time.perf_counter() - start
            finally:
                for hog in hogs:
                    hog.kill()
            print(f"{exercise.folder}: {args.k} grades beside {args.hogs} hogs in {elapsed:.1f} s; "
                  f"undecided at first {first_undecided}, still short after measuring again {short}; "
                  f"worst figure {worst:.2f} of its pass line; runs measuring again "
                  f"{judge.input_sets.runs['measured again']}")


if __name__ == "__main__":
    main()
