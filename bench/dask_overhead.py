"""Coordination overhead of the Dask executor against local threads.

    python bench/dask_overhead.py [-n 1000] [--repeat 3] [--secret] [--quick]

Generates N exercise-01 submissions (the reference, the stub, a broken one,
each pitfall variant, in turn; every one unique, so none is deduplicated),
then grades them in pairs, in this process, each side into a fresh gradebook:

- local: ``grade_class`` with 2 threads and one sandbox (``--jobs 2``);
- dask: ``grade_class`` on a fresh 2-worker ``LocalCluster`` (processes,
  1 thread each, loopback; each imports the grader and starts its
  fork-server as it starts, as ``grader grade --executor dask``'s does).

Each side is timed in two parts. "start": local, the sandbox fork-server
until it has run a child; dask, the cluster until every worker's fork-server
has run a child (the workers start theirs as they start, as
``grader grade --executor dask``'s do). "grading": ``grade_class`` from its
call to its last result, on warm sandboxes, including the references' runs
(local: in its queue; dask: the run's vetting and fixed results). Overheads:
grading, dask / local - 1 (goal: <= 10 % as the median of the pairs); with
start, (dask start + grading) / (local start + grading) - 1.

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


def time_local(course, submissions: Path, work: Path, limits: Limits, inputs) -> tuple[float, float, frozenset[str]]:
    """(start, grading, layers): the fork-server's start, then the class."""
    exercises = [course.exercise("01")]
    start = time.perf_counter()
    with Gradebook(work / "local.db") as book, Sandbox(limits) as sandbox:
        layers = active_layers(sandbox.layers())    # the fork-server is up and has run a child
        started = time.perf_counter() - start
        start = time.perf_counter()
        run = grade_class(course, exercises, submissions, book, Judge(course, sandbox, REPO, inputs), work / "wl",
                          jobs=2)
        elapsed = time.perf_counter() - start
    assert run.graded == len(list(submissions.iterdir())), run.graded
    return started, elapsed, layers


def time_dask(course, submissions: Path, work: Path, limits: Limits, inputs, layers) -> tuple[float, float]:
    """(start, grading): the cluster's start until every worker's fork-server
    is up and has run a child, then the class."""
    from distributed import Client

    from grader.scale.dask_executor import DaskExecutor, local_cluster, vet_workers
    from grader.scale.worker import RunSpec

    start = time.perf_counter()
    with local_cluster(2) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        vet_workers(client, RunSpec("warm-up", str(REPO / "course.yaml"), limits, None, frozenset()),
                    list(client.scheduler_info()["workers"]))
        started = time.perf_counter() - start
        start = time.perf_counter()
        with Gradebook(work / "dask.db") as book:
            executor = DaskExecutor(client, REPO / "course.yaml", limits, inputs=inputs, required=layers)
            run = grade_class(course, [course.exercise("01")], submissions, book, None, work / "wd",
                              executor=executor)
        elapsed = time.perf_counter() - start
    assert run.graded == len(list(submissions.iterdir())), run.graded
    return started, elapsed


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
            local_start, t_local, layers = time_local(course, submissions, work, limits, inputs)
            dask_start, t_dask = time_dask(course, submissions, work, limits, inputs, layers)
            pairs.append((local_start, t_local, dask_start, t_dask))
            print(f"pair {i + 1}: local --jobs 2 {t_local:6.1f} s ({args.n / t_local:5.1f}/s) + start {local_start:4.1f} s"
                  f"   dask 2 workers {t_dask:6.1f} s + start {dask_start:4.1f} s   "
                  f"overhead {t_dask / t_local - 1:+6.1%}, "
                  f"with start {(t_dask + dask_start) / (t_local + local_start) - 1:+6.1%}   "
                  f"[{at_start} at its start]", flush=True)
    grading = statistics.median(d / loc - 1 for _, loc, _, d in pairs)
    with_start = statistics.median((ds + d) / (ls + loc) - 1 for ls, loc, ds, d in pairs)
    print(f"median of {len(pairs)}: overhead (grading) {grading:+.1%}, with the cluster's start {with_start:+.1%} "
          f"(goal: grading <= +10%); {load()} at end")


if __name__ == "__main__":
    main()
