"""Start-up cost of the grader's commands against one `import torch`, in one run.

    python bench/startup.py [--repeat 3]

Prints the median wall time of each, and its ratio to `python -c "import
torch"` measured in the same run (the floor for anything that grades):

- `grader --help` and `grader validate` (they import no torch);
- `grader grade` of a class of one submission (exercise 01, fresh gradebook):
  the fixed cost of a grading run, with the fork-server started first thing
  (its torch import beside the grader's) and, for comparison, started when
  first needed (GRADER_SANDBOX_PRESTART=0, the old order).

The goal (issue 19) is `grader grade`'s fixed cost within ~1.2x of import torch.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return elapsed


def grade_one(work: Path, env: dict[str, str] | None = None) -> float:
    """`grader grade` of one correct exercise-01 submission into a fresh gradebook."""
    subs = work / "subs"
    if not subs.exists():
        (subs / "student000" / "01_softmax").mkdir(parents=True)
        shutil.copy(REPO / "solutions" / "01_softmax" / "softmax.py", subs / "student000" / "01_softmax")
    (work / "grades.db").unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        (work / f"grades.db{suffix}").unlink(missing_ok=True)
    return timed([sys.executable, "-m", "grader", "grade", str(subs), "-e", "01", "--jobs", "1",
                  "--db", str(work / "grades.db"), "--out", str(work / "grading")], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (the median is shown)")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        for _ in range(args.repeat):  # interleaved, so a load spike hits every row alike
            rows.setdefault('python -c "import torch"', []).append(timed([sys.executable, "-c", "import torch"]))
            rows.setdefault("grader --help", []).append(timed([sys.executable, "-m", "grader", "--help"]))
            rows.setdefault("grader validate", []).append(timed([sys.executable, "-m", "grader", "validate"]))
            rows.setdefault("grader grade, 1 submission", []).append(grade_one(work))
            rows.setdefault("  same, server started late", []).append(
                grade_one(work, {"GRADER_SANDBOX_PRESTART": "0"}))
    torch_s = statistics.median(rows['python -c "import torch"'])
    print(f"start-up, median of {args.repeat}; load average {load_at_start:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end, on {os.cpu_count()} cores")
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"  {name:32s} {median:6.2f} s   {median / torch_s:5.2f}x import torch")


if __name__ == "__main__":
    main()
