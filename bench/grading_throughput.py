"""Grading throughput: `grader grade` against the alternatives, in one run.

    python bench/grading_throughput.py [-n 100] [-e 01 -e 03 | -e all] [--timeout 10]
                                       [--pytest-sample 10] [--nbgrader-sample 4] [--repeat 5]

Generates N submissions (correct, every pitfall variant, untouched stubs,
one that crashes at import, one that hangs), then measures:

- ours: `grader grade` over all N (sandboxed hidden checks), with its
  default --jobs (one more than the cores) unless --jobs says otherwise;
- pytest: one fresh `pytest` process per submission running the public
  tests (the usual "run the tests per student" script), on a sample;
- nbgrader: `nbgrader autograde` of the same code as notebooks, on a sample
  (each notebook starts a kernel that imports torch).

The baselines run on samples because they are slow: one student of each
kind (correct, each variant, stub, crash, hang), the same mix as the class,
so their time per submission compares with ours. A hanging submission
costs each side its timeout; `--no-hang` shows the cost without them.

`--repeat K` grades the class K times and autogrades nbgrader's sample K
times, one after the other in pairs (a VM's speed drifts within minutes),
and prints each pair's ratio and their median: one autograde of a sample
swings by 10-15 % between runs here.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.course import load_course  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402

HANG = "import time\n\n\ndef {name}(*args, **kwargs):\n    time.sleep(3600)\n"
CRASH = "raise RuntimeError('left over from my notebook')\n"


def make_class(course, exercises, n: int, out: Path, hang: bool = True) -> tuple[list[dict[str, str]], int]:
    """N students; student i hands in, for each exercise, kind i of:
    reference, each variant, stub, crash at import, hang. Returns the
    students and the number of kinds (students 0..kinds-1 are one of each)."""
    kinds = []
    for exercise in exercises:
        reference = (REPO / "solutions" / exercise.folder / exercise.module).read_text()
        stub = (REPO / "exercises" / exercise.folder / exercise.module).read_text()
        variants = [v.source for v in load_variants(exercise, REPO).values()]
        pool = [reference, reference, *variants, stub, CRASH, *([HANG.format(name=exercise.symbols[0])] if hang else [])]
        kinds.append((exercise, pool))
    students = []
    for i in range(n):
        files = {}
        for exercise, pool in kinds:
            folder = out / f"student{i:03d}" / exercise.folder
            folder.mkdir(parents=True)
            source = pool[i % len(pool)]
            (folder / exercise.module).write_text(source)
            files[exercise.id] = source
        students.append(files)
    return students, max(len(pool) for _, pool in kinds)


def time_ours(subs: Path, exercises, timeout: float, work: Path, jobs: int | None) -> float:
    cmd = [sys.executable, "-m", "grader", "grade", str(subs), "--timeout", str(timeout),
           "--db", str(work / "grades.db"), "--out", str(work / "grading")]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    for exercise in exercises:
        cmd += ["-e", exercise.id]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"grader grade failed:\n{done.stdout}{done.stderr}")
    return elapsed


def time_pytest(students, exercises, sample: int, timeout: float, work: Path) -> float:
    """Seconds per submission: a fresh pytest per student over the exercises' public tests."""
    total = 0.0
    for i, files in enumerate(students[:sample]):
        tree = work / f"pytest{i}"
        for exercise in exercises:
            shutil.copytree(REPO / "exercises" / exercise.folder, tree / exercise.folder)
            (tree / exercise.folder / exercise.module).write_text(files[exercise.id])
        shutil.copy(REPO / "exercises" / "conftest.py", tree / "conftest.py")
        started = time.perf_counter()
        try:
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
                            "-p", "no:hypothesispytest", str(tree)], cwd=tree, capture_output=True,
                           timeout=timeout * len(exercises), env={**os.environ, "PYTHONPATH": str(REPO)})
        except subprocess.TimeoutExpired:
            pass
        total += time.perf_counter() - started
    return total / sample


def nbgrader_autograde(course, students, exercises, sample: int, timeout: float,
                       work: Path) -> tuple[float, Callable[[], float]] | None:
    """`nbgrader autograde` of the same code as notebooks: its start-up
    (an autograde with nothing submitted) and a function that autogrades
    the sample (again: --force) and returns its seconds per submission
    beyond that. A class of N then costs start-up + N x each: the start-up
    is paid once, as ours is, not once per sample student."""
    try:
        import nbformat

        from grader.release.common import answer_cell_id
        from grader.release.nbgrader import write_course
    except ImportError:
        return None
    course_dir, home = work / "nbgrader", work / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}

    def run(*args: str) -> None:
        subprocess.run([sys.executable, *args], cwd=course_dir, env=env, check=True, capture_output=True)

    # Each exercise's own assignment: a class over several assignments is
    # autograded once per assignment, each notebook in its own.
    owner = {e.id: next((a for a in course.assignments if e.id in a.exercises), None) for e in exercises}
    if missing := [e for e, a in owner.items() if a is None]:
        raise SystemExit(f"exercise(s) {', '.join(missing)} belong to no assignment in course.yaml: "
                         "nbgrader cannot autograde them")
    assignments = list(dict.fromkeys(a.id for a in owner.values()))
    write_course(course, REPO, course_dir, assignment_ids=assignments)
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--user", "--name", "python3"], env=env,
                   check=True, capture_output=True)
    (course_dir / "nbgrader_config.py").write_text(
        (course_dir / "nbgrader_config.py").read_text() + f"\nc.ExecutePreprocessor.timeout = {int(timeout)}\n")
    for assignment_id in assignments:
        run("-m", "nbgrader", "generate_assignment", assignment_id, "--force")

    def autograde() -> float:
        started = time.perf_counter()
        for assignment_id in assignments:
            subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment_id, "--create", "--force"],
                           cwd=course_dir, env=env, capture_output=True)
        return time.perf_counter() - started

    start_up_s = min(autograde() for _ in range(2))  # nothing submitted yet
    for i, files in enumerate(students[:sample]):
        for exercise in exercises:
            assignment_id = owner[exercise.id].id
            target = course_dir / "submitted" / f"student{i:03d}" / assignment_id
            target.mkdir(parents=True, exist_ok=True)
            notebook = nbformat.read(course_dir / "release" / assignment_id / f"{exercise.folder}.ipynb", as_version=4)
            (cell,) = [c for c in notebook.cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == answer_cell_id(exercise)]
            cell.source = files[exercise.id]
            nbformat.write(notebook, target / f"{exercise.folder}.ipynb")
    return start_up_s, lambda: (autograde() - start_up_s) / sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100, help="submissions (students)")
    parser.add_argument("-e", "--exercise", action="append",
                        help="exercise ids (default: 01), from one or several assignments; 'all': the whole course")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per submission and exercise")
    parser.add_argument("--pytest-sample", type=int, help="default: one student of each kind")
    parser.add_argument("--nbgrader-sample", type=int, help="default: one student of each kind")
    parser.add_argument("--no-hang", action="store_true", help="leave the hanging kind out of the class")
    parser.add_argument("--jobs", type=int, help="grader grade --jobs (default: its own, one more than the cores)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="pairs of (grader grade, nbgrader autograde of the sample); the median ratio is printed")
    args = parser.parse_args()
    course = load_course()
    load_at_start = os.getloadavg()[0]
    chosen = args.exercise or ["01"]
    # -e all: the whole course, every exercise (and so every assignment) in one class.
    exercises = list(course.exercises) if chosen == ["all"] else [course.exercise(i) for i in chosen]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        students, kinds = make_class(course, exercises, args.n, work / "subs", hang=not args.no_hang)
        # The first `kinds` students are one of each kind, as the class is:
        # a sample of them meets the same mix (hangs included) as ours.
        pytest_sample = min(args.pytest_sample or kinds, args.n)
        nbgrader_sample = min(args.nbgrader_sample or kinds, args.n)
        nbgrader = nbgrader_autograde(course, students, exercises, nbgrader_sample, args.timeout, work)
        pairs = []  # (ours, nbgrader's seconds each or None), measured one after the other
        for i in range(args.repeat):
            (work / f"ours{i}").mkdir()
            ours_s = time_ours(work / "subs", exercises, args.timeout, work / f"ours{i}", args.jobs)
            pairs.append((ours_s, nbgrader[1]() if nbgrader is not None else None))
        ours_s = sorted(pairs)[len(pairs) // 2][0]  # the median; of an even count, the slower middle one
        # The start-up split (bench/startup.py has more): what any class pays before grading.
        from startup import grade_one, timed

        (work / "startup").mkdir()
        torch_s = timed([sys.executable, "-c", "import torch"])
        fixed_s = grade_one(work / "startup")
        pytest_s = time_pytest(students, exercises, pytest_sample, args.timeout, work)
    per_min = 60 * args.n / ours_s
    label = "+".join(e.id for e in exercises)
    mix = "no hanging code" if args.no_hang else "1 in 8 hangs"
    from grader.cli.input_checks import default_jobs

    jobs = args.jobs or default_jobs()
    print(f"{args.n} submissions of exercise(s) {label} ({mix}), timeout {args.timeout:g} s, {jobs} jobs;"
          f" baselines on {pytest_sample} / {nbgrader_sample} students, one of each kind")
    print(f"  grader grade:          {ours_s:7.1f} s in all   {per_min:8.1f} submissions/min"
          + (f"   (median of {len(pairs)}: {' '.join(f'{o:.1f}' for o, _ in pairs)} s)" if len(pairs) > 1 else ""))
    print(f"    of which start-up:   {fixed_s:7.1f} s (a class of one)   = {fixed_s / torch_s:.2f}x "
          f"`import torch` ({torch_s:.1f} s)")
    print(f"    grading proper:      {1000 * (ours_s - fixed_s) / args.n:7.1f} ms per submission (total minus start-up)")
    print(f"  load average {load_at_start:.1f} at start, {os.getloadavg()[0]:.1f} at end, on {os.cpu_count()} cores")
    print(f"  fresh pytest each:     {pytest_s:7.2f} s each   {60 / pytest_s:8.1f} submissions/min"
          f"   -> ours is {per_min / (60 / pytest_s):.1f}x")
    if nbgrader is None:
        print("  nbgrader autograde:    not installed (pip install -e '.[release]')")
    else:
        start_up_s = nbgrader[0]
        ratios = sorted(((start_up_s + args.n * each) / mine, each) for mine, each in pairs)
        ratio, each_s = ratios[(len(ratios) - 1) // 2]  # of an even count, the lower middle one
        class_s = start_up_s + args.n * each_s
        print(f"  nbgrader autograde:    {each_s:7.2f} s each + {start_up_s:.1f} s start-up = {class_s:.0f} s for "
              f"{args.n}   -> ours is {ratio:.1f}x" + (" (the median pair)" if len(pairs) > 1 else ""))
        if len(pairs) > 1:
            print("  pairs (ours, nbgrader each -> ratio): " + "; ".join(
                f"{mine:.1f} s, {each:.2f} s -> {(start_up_s + args.n * each) / mine:.1f}x" for mine, each in pairs))


if __name__ == "__main__":
    main()
