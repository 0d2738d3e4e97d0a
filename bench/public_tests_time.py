"""How long `pytest exercises/NN` takes beyond `python -c "import torch"`.

    python bench/public_tests_time.py [-r 5] [01 02 ...]

For each exercise, the median wall time of `pytest exercises/NN` on the
untouched stub and on the reference (a temporary copy with the solution
over the stub), and of a bare `import torch`, measured in the same run.
The goal is at most about 1 s over `import torch`.

Exercises 11 and 13 each have a training test (1.5-2.5 s on one thread:
the copy task, a GPT learning Python), marked `training`: `pytest
exercises/NN` skips it and says how to run it. For them the reference is
also timed with `--train`, the run that includes it.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.course import load_course  # noqa: E402

# The exercises whose training test only runs with --train.
WITH_TRAINING_TEST = {"11_transformer", "13_training"}


def median_seconds(cmd: list[str], cwd: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exercises", nargs="*", help="exercise ids (default: all)")
    parser.add_argument("-r", "--repeats", type=int, default=5)
    args = parser.parse_args()
    course = load_course()
    chosen = [course.exercise(i) for i in args.exercises] if args.exercises else course.exercises
    torch_s = median_seconds([sys.executable, "-c", "import torch"], REPO, args.repeats)
    print(f"python -c 'import torch': {torch_s:.2f} s (median of {args.repeats})")
    print(f"{'exercise':<26} {'stub':>7} {'reference':>10}   beyond import torch: stub, reference")
    with tempfile.TemporaryDirectory(prefix="public-time-") as tmp:
        for exercise in chosen:
            stub_s = median_seconds([sys.executable, "-m", "pytest", "-q", f"exercises/{exercise.folder}"],
                                    REPO, args.repeats)
            copy = Path(tmp) / "repo"
            shutil.rmtree(copy, ignore_errors=True)
            (copy / "exercises").mkdir(parents=True)
            shutil.copytree(REPO / "exercises" / exercise.folder, copy / "exercises" / exercise.folder)
            shutil.copy(REPO / "exercises" / "conftest.py", copy / "exercises" / "conftest.py")
            shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
            shutil.copy(REPO / "course.yaml", copy / "course.yaml")
            for source in (REPO / "solutions" / exercise.folder).glob("*.py"):
                shutil.copy(source, copy / "exercises" / exercise.folder / source.name)
            ref_s = median_seconds([sys.executable, "-m", "pytest", "-q", f"exercises/{exercise.folder}"],
                                   copy, args.repeats)
            line = f"{exercise.folder:<26} {stub_s:6.2f}s {ref_s:9.2f}s   {stub_s - torch_s:+.2f} s, {ref_s - torch_s:+.2f} s"
            if exercise.folder in WITH_TRAINING_TEST:
                trained_s = median_seconds([sys.executable, "-m", "pytest", "-q", f"exercises/{exercise.folder}",
                                            "--train"], copy, args.repeats)
                line += f"; reference with --train: {trained_s - torch_s:+.2f} s"
            print(line)


if __name__ == "__main__":
    main()
