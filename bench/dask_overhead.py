"""Coordination overhead of the Dask executor against local threads.

    python bench/dask_overhead.py [-n 1000] [--repeat 3] [--secret] [--quick]

Generates N exercise-01 submissions (the reference, the stub, a broken one,
each pitfall variant, in turn; every one unique, so none is deduplicated),
then grades them in pairs, in this process, each side into a fresh gradebook:

- local: ``grade_class`` with 2 threads and one sandbox (``--jobs 2``);
- dask: ``grade_class`` on a fresh 2-worker ``LocalCluster`` (processes,
  1 thread each, loopback; each imports the grader and starts its
  fork-server as it starts, as ``grader grade --executor dask``'s does).

"grading" is ``grade_class`` from its call to its last result: on both sides
it includes the references' runs (local: in its queue; dask: the run's
fixed results), and starting the sandbox fork-server (local: the judge's
first run; dask: what is left of the workers' own when the run vets them).
"with start" adds the cluster's start to the Dask side. Each overhead is
dask / local - 1 (goal: <= 10 % for grading, as the median of the pairs).

``--repeat K`` runs K pairs, local then dask, one after the other (a shared
machine's speed drifts within minutes: a single pair cannot tell the
overhead from the drift), prints each pair with the load average at its
start, and the medians. ``--secret`` draws each submission's hidden inputs
from a grading secret, as ``grader grade`` does (the reference then runs
once per submission too); the default grades on the fixed inputs, the
cheapest work per submission and so the largest relative overhead.
``--quick``: n = 24, one pair (a few seconds' worth of grading, to try a change).
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
from grader.sandbox.layers import active_layers  # noqa: E402

BENCH_SECRET = b"bench-dask-overhead-secret-0123456789abcdef"


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


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def time_local(course, submissions: Path, work: Path, limits: Limits, inputs) -> tuple[float, frozenset[str]]:
    exercises = [course.exercise("01")]
    start = time.perf_counter()
    with Gradebook(work / "local.db") as book, Sandbox(limits) as sandbox:
        run = grade_class(course, exercises, submissions, book, Judge(course, sandbox, REPO, inputs), work / "wl",
                          jobs=2)
        layers = active_layers(sandbox.layers())
    elapsed = time.perf_counter() - start
    assert run.graded == len(list(submissions.iterdir())), run.graded
    return elapsed, layers


def time_dask(course, submissions: Path, work: Path, limits: Limits, inputs, layers) -> tuple[float, float]:
    from distributed import Client

    from grader.scale.dask_executor import DaskExecutor, local_cluster

    start = time.perf_counter()
    with local_cluster(2) as cluster, Client(cluster) as client:
        started = time.perf_counter() - start
        start = time.perf_counter()
        with Gradebook(work / "dask.db") as book:
            executor = DaskExecutor(client, REPO / "course.yaml", limits, inputs=inputs, required=layers)
            run = grade_class(course, [course.exercise("01")], submissions, book, None, work / "wd",
                              executor=executor)
        elapsed = time.perf_counter() - start
    assert run.graded == len(list(submissions.iterdir())), run.graded
    return elapsed, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="submissions (default 1000)")
    parser.add_argument("--repeat", type=int, default=1, help="pairs (local, dask), one after the other; medians")
    parser.add_argument("--secret", action="store_true", help="per-submission hidden inputs, as grader grade draws")
    parser.add_argument("--quick", action="store_true", help="n = 24, one pair: to try a change")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeat = 24, 1
    if args.n < 1 or args.repeat < 1:
        parser.error("-n and --repeat must be at least 1")
    course = load_course(REPO / "course.yaml")
    limits = Limits(**course.grading.model_dump())
    inputs = HiddenInputs(BENCH_SECRET) if args.secret else None
    print(f"submissions: {args.n} (exercise 01, {'per-submission' if args.secret else 'fixed'} inputs), "
          f"{args.repeat} pair(s); {load()} at start", flush=True)
    pairs = []
    with tempfile.TemporaryDirectory(prefix="dask-bench-") as tmp:
        submissions = make_class(Path(tmp) / "class", args.n, course)
        for i in range(args.repeat):
            work = Path(tmp) / f"pair{i}"
            work.mkdir()
            at_start = load()
            t_local, layers = time_local(course, submissions, work, limits, inputs)
            t_dask, t_start = time_dask(course, submissions, work, limits, inputs, layers)
            pairs.append((t_local, t_dask, t_start))
            print(f"pair {i + 1}: local --jobs 2 {t_local:6.1f} s ({args.n / t_local:5.1f}/s)   "
                  f"dask 2 workers {t_dask:6.1f} s + cluster start {t_start:4.1f} s   "
                  f"overhead {t_dask / t_local - 1:+6.1%}, with start {(t_dask + t_start) / t_local - 1:+6.1%}   "
                  f"[{at_start} at its start]", flush=True)
    grading = statistics.median(d / loc - 1 for loc, d, _ in pairs)
    with_start = statistics.median((d + s) / loc - 1 for loc, d, s in pairs)
    print(f"median of {len(pairs)}: overhead (grading) {grading:+.1%}, with the cluster's start {with_start:+.1%} "
          f"(goal: grading <= +10%); {load()} at end")


if __name__ == "__main__":
    main()
