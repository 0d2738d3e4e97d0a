"""The whole course in one class: every exercise of course.yaml, each
student handing in a mix of correct, pitfall-variant, untouched-stub and
crashing submissions, graded by `grader grade` and, on a sample of the same
code as notebooks, by `nbgrader autograde`, in the same run.

    python bench/whole_course.py [-n 142] [--repeat 3] [--nbgrader-sample 4] [any grading_throughput option]
    python bench/whole_course.py --quick      # a few students, one pair: to try it

It is bench/grading_throughput.py with ``-e all`` and no hanging code (a
hang costs each side its timeout, not the exercise's work); the ratio it
prints is the whole course's, not exercise 01's.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grading_throughput  # noqa: E402


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
    # The course's own timeout (course.yaml: 60 s), not exercise 01's 10 s:
    # 11's and 13's training take seconds, more on a busy machine.
    defaults = {"-n": "142", "--nbgrader-sample": "4", "--timeout": "60"}
    if quick:
        defaults.update({"-n": "12", "--nbgrader-sample": "1", "--pytest-sample": "1"})
    args = ["-e", "all", "--no-hang"]
    for option, value in defaults.items():
        if option not in argv:
            args += [option, value]
    sys.argv = [sys.argv[0], *args, *argv]
    grading_throughput.main()


if __name__ == "__main__":
    main(sys.argv[1:])
