"""Coordination overhead of the Dask executor against local threads.

    python bench/dask_overhead.py [-n 1000]

Generates N exercise-01 submissions (the reference, the stub, a broken one,
each pitfall variant, in turn; every one unique, so none is deduplicated),
then grades them twice, in this process, into fresh gradebooks:

- local: ``grade_class`` with 2 threads and one sandbox (``--jobs 2``);
- dask: ``grade_class`` on a 2-worker ``LocalCluster`` (processes, 1 thread
  each, loopback), timed with and without starting the cluster.

overhead = dask / local - 1 (goal: <= 10% without the start-up).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.course import load_course  # noqa: E402
from grader.gradebook import Gradebook  # noqa: E402
from grader.run.grading import grade_class  # noqa: E402
from grader.judge import Judge  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.sandbox import Limits, Sandbox  # noqa: E402


def make_class(root: Path, n: int, course) -> Path:
    exercise = course.exercise("01")
    sources = [(REPO / "solutions" / exercise.folder / exercise.module).read_text(),
               (REPO / "exercises" / exercise.folder / exercise.module).read_text(),
               "def softmax(x, dim=-1)\n    return x\n",
               *(v.source for v in load_variants(exercise, REPO).values())]
    for i in range(n):
        folder = root / f"s{i:05d}" / exercise.folder
        folder.mkdir(parents=True)
        # A comment makes each file unique: no result is shared by content.
        (folder / exercise.module).write_text(f"{sources[i % len(sources)]}\n# student {i}\n")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="submissions (default 1000)")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    from grader.scale.dask_executor import DaskExecutor

    course = load_course(REPO / "course.yaml")
    exercises = [course.exercise("01")]
    limits = Limits(**course.grading.model_dump())
    with tempfile.TemporaryDirectory(prefix="dask-bench-") as tmp:
        tmp = Path(tmp)
        submissions = make_class(tmp / "class", args.n, course)

        start = time.perf_counter()
        with Gradebook(tmp / "local.db") as book, Sandbox(limits) as sandbox:
            local = grade_class(course, exercises, submissions, book, Judge(course, sandbox, REPO), tmp / "wl", jobs=2)
        t_local = time.perf_counter() - start

        start = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            t_start = time.perf_counter() - start
            start_grading = time.perf_counter()
            with Gradebook(tmp / "dask.db") as book:
                dask = grade_class(course, exercises, submissions, book, None, tmp / "wd",
                                   executor=DaskExecutor(client, REPO / "course.yaml", limits))
            t_dask = time.perf_counter() - start_grading
        assert local.graded == dask.graded == args.n, (local.graded, dask.graded)
    print(f"submissions: {args.n} (exercise 01)")
    print(f"local --jobs 2:           {t_local:8.1f} s  ({args.n / t_local:.1f}/s)")
    print(f"dask, 2 workers:          {t_dask:8.1f} s  ({args.n / t_dask:.1f}/s), cluster start {t_start:.1f} s")
    print(f"overhead (grading only):  {t_dask / t_local - 1:+.1%}")
    print(f"overhead (with start):    {(t_dask + t_start) / t_local - 1:+.1%}")


if __name__ == "__main__":
    main()
