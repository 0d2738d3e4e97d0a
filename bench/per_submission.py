"""Where one submission's time goes, stage by stage, in one run.

    python bench/per_submission.py [-e 01] [-n 20]

Grades the same submission N times in this process, with the fork-server
warm and the references computed (as in the middle of a class run), and
prints the median per stage:

- collect:  reading the student's folder, hashing and assembling it (parent);
- sandbox:  `Sandbox.run`: hand-over to a pre-forked child, the probe calls
            in the child, the results back over the pipes, teardown;
            split into the floor (an empty module, no calls) and the rest
            (the child's import and probe work for this exercise);
- compare:  the judge's verdicts from the results (parent), for a correct
            submission and for one that fails like a pitfall variant (the
            failing one also compares against every variant);
- record:   one gradebook write (as `grader grade` does: record, then get),
            with the gradebook's durability setting and with synchronous=FULL
            for comparison (both WAL).

The parent's CPU per submission (all threads) is printed beside the wall
times. Ratios are to the whole submission measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.course import load_course  # noqa: E402
from grader.gradebook import Gradebook, Key  # noqa: E402
from grader.judge import Judge  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.sandbox import Limits, Sandbox  # noqa: E402
from grader.intake.submissions import collect  # noqa: E402


class TimedSandbox:
    """The sandbox, with the wall time of each run noted (the judge's time
    minus this is its comparing)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox
        self.last_s = 0.0

    def run(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self._sandbox.run(*args, **kwargs)
        finally:
            self.last_s = time.perf_counter() - started

    def __getattr__(self, name: str):
        return getattr(self._sandbox, name)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-e", "--exercise", default="01", help="exercise id")
    parser.add_argument("-n", type=int, default=20, help="repetitions (the median is shown)")
    args = parser.parse_args()
    course = load_course(REPO / "course.yaml")
    exercise = course.exercise(args.exercise)
    variants = load_variants(exercise, REPO)
    sources = {"correct": (REPO / "solutions" / exercise.folder / exercise.module).read_text()}
    if variants:
        pitfall_id, variant = next(iter(variants.items()))
        sources[f"variant {pitfall_id}"] = variant.source
    rows: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds)

    with tempfile.TemporaryDirectory(prefix="bench-per-submission-") as tmp, \
            Sandbox(Limits.from_grading(course.grading)) as raw:
        work = Path(tmp)
        os.chmod(work, 0o755)
        sandbox = TimedSandbox(raw)
        judge = Judge(course, sandbox, REPO)  # type: ignore[arg-type]  (the same interface)
        judge.expected(exercise, work / "judge")
        judge.variant_results(exercise, work / "judge")
        empty = work / "empty"
        empty.mkdir()
        os.chmod(empty, 0o755)
        (empty / "empty_module.py").write_text("")
        books = {"record (gradebook)": Gradebook(work / "grades.db")}
        books["record, synchronous=FULL"] = Gradebook(work / "grades-full.db")
        books["record, synchronous=FULL"]._db.execute("PRAGMA synchronous=FULL")
        for i in range(args.n):
            started = time.perf_counter()
            raw.run(empty, "empty_module", [])
            note("sandbox floor (empty module)", time.perf_counter() - started)
            for kind, source in sources.items():
                subs = work / f"subs{i}-{kind.split()[0]}"
                (subs / "student" / exercise.folder).mkdir(parents=True)
                (subs / "student" / exercise.folder / exercise.module).write_text(source)
                cpu0, t0 = _cpu(), time.perf_counter()
                (submission,) = collect(subs, course, [exercise], work / f"collect{i}-{kind.split()[0]}", REPO)
                part = submission.exercises[exercise.id]
                t1 = time.perf_counter()
                result = judge.grade(exercise, part.folder, work / "judge")
                t2 = time.perf_counter()
                key = Key(f"s{i}-{kind}", exercise.id, part.content_hash or "missing", course.course.version)
                book = books["record (gradebook)"]
                book.record(key, points=result.points, max_points=result.max_points, status=result.status,
                            reason=result.reason, verdicts=[v.to_dict() for v in result.verdicts],
                            figures=result.figures)
                book.get(key)
                t3 = time.perf_counter()
                cpu = _cpu() - cpu0
                note(f"[{kind}] collect", t1 - t0)
                note(f"[{kind}] sandbox run", sandbox.last_s)
                note(f"[{kind}] compare", (t2 - t1) - sandbox.last_s)
                note(f"[{kind}] record", t3 - t2)
                note(f"[{kind}] whole submission", t3 - t0)
                note(f"[{kind}] parent CPU (all threads)", cpu)
                full = books["record, synchronous=FULL"]
                t4 = time.perf_counter()
                full.record(key, points=result.points, max_points=result.max_points, status=result.status,
                            reason=result.reason, verdicts=[v.to_dict() for v in result.verdicts],
                            figures=result.figures)
                full.get(key)
                note(f"[{kind}] record, synchronous=FULL", time.perf_counter() - t4)
        for book in books.values():
            book.close()
    print(f"one submission of exercise {exercise.id}, median of {args.n}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  {'sandbox floor (empty module)':44s} {1000 * statistics.median(rows.pop('sandbox floor (empty module)')):8.1f} ms")
    for kind in sources:
        whole = statistics.median(rows[f"[{kind}] whole submission"])
        print(f"  {kind}:")
        for name, times in rows.items():
            if name.startswith(f"[{kind}] "):
                median = statistics.median(times)
                print(f"    {name.removeprefix(f'[{kind}] '):42s} {1000 * median:8.1f} ms  {median / whole:6.1%}")


if __name__ == "__main__":
    main()
