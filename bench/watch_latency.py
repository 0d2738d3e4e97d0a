"""From `nbgrader submit` returning to feedback the student can fetch, in one run.

    python bench/watch_latency.py [-e 01] [--singles 5] [--burst 50]

Sets up a throwaway nbgrader course and exchange (HOME, kernel, course
directory under a temp folder), starts `grader watch --exchange` (warm: it
has computed the references), then:

- singles: students submit one at a time; each latency is from their
  `nbgrader submit` returning to the feedback file `nbgrader fetch_feedback`
  reads being there (graded);
- burst: N students submit at once (8 submits in parallel); each one's
  latency, as above;
- nbgrader: its manual cycle for the singles' submissions, timed as the
  commands an instructor runs (collect, autograde, generate_feedback,
  release_feedback): the soonest a student could fetch feedback there.
  For the burst it is that cycle's per-submission time times N (autograde is
  per notebook; running it on N here would take minutes), marked as such.

Submissions alternate between the reference and a pitfall variant.

Who handed in is proved by the inbound folder's owner (grader/intake/identity.py),
so the nbgrader run makes one unix user per student (``gwatch<student>``,
left in place for the next run) and runs their nbgrader commands as that
user (as root; tests/unix_students.py).

    python bench/watch_latency.py --hostile [--students 6] [--folders 100000]

runs only the hostile comparison, on a plain folder: students drop their
folder one at a time (an atomic rename) and wait for their feedback page,
first alone (quiet), then beside three hostile students who hand in a 4 GiB
sparse file beside their module, 100,000 empty folders, and a FIFO, and keep
touching them. The quiet and hostile medians are printed side by side; the
others' median must stay within 2x of the quiet one.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))   # unix_students: the students as unix users

from grader.course import load_course  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402


class World:
    """HOME, an nbgrader course directory and an exchange under ``tmp``."""

    def __init__(self, tmp: Path, course_id: str) -> None:
        self.home, self.course_dir, self.exchange = tmp / "home", tmp / "course", tmp / "exchange"
        for folder in (self.home, self.exchange):
            folder.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON"))}
        self.env.update(HOME=str(self.home), PYTHONPATH=str(REPO), USER="instructor",
                        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        self.exchange_args = [f"--Exchange.root={self.exchange}", f"--course={course_id}"]
        # nbconvert's templates live under the prefix it is installed in (a venv made
        # with --system-site-packages or a worktree's venv does not have them).
        import nbconvert

        shared = Path(nbconvert.__file__).resolve().parents[4] / "share" / "jupyter"
        if shared.is_dir():
            self.env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(shared), self.env.get("JUPYTER_PATH")]))

    def run(self, *args: str, cwd: Path) -> float:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, *args], cwd=cwd, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{args} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-e", "--exercise", default="01")
    parser.add_argument("--singles", type=int, default=5, help="submissions one at a time")
    parser.add_argument("--burst", type=int, default=50, help="submissions at once (0: none)")
    parser.add_argument("--hostile", action="store_true", help="only the quiet vs hostile comparison (plain folder)")
    parser.add_argument("--students", type=int, default=6, help="--hostile: submissions in each phase")
    parser.add_argument("--folders", type=int, default=100_000, help="--hostile: the hostile student's empty folders")
    args = parser.parse_args()
    if args.hostile:
        from watch_hostile import hostile_comparison

        raise SystemExit(hostile_comparison(load_course().exercise(args.exercise), args.students, args.folders))
    import nbformat

    from grader.release.common import answer_cell_id
    from grader.release.nbgrader import write_course

    course = load_course()
    exercise = course.exercise(args.exercise)
    assignment = next(a for a in course.assignments if exercise.id in a.exercises)
    course_id = course.release["nbgrader"]["course_id"]
    reference = (REPO / "solutions" / exercise.folder / exercise.module).read_text()
    variants = [v.source for v in load_variants(exercise, REPO).values()]
    if os.geteuid() != 0:
        raise SystemExit("the nbgrader run makes one unix user per student (ownership proves who handed in): "
                         "run it as root, or run --hostile")
    from unix_students import UnixStudents

    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        Path(tmp).chmod(0o755)   # the students reach the exchange and their homes
        world = World(Path(tmp), course_id)
        world.exchange.chmod(0o777)
        students = UnixStudents(Path(tmp), world.env)
        accounts: dict[str, str] = {}
        world.run("-m", "ipykernel", "install", "--user", "--name", "python3", cwd=world.home)
        small = course.model_copy(update={"assignments": [assignment.model_copy(update={"exercises": [exercise.id]})]})
        write_course(small, REPO, world.course_dir, assignment_ids=[assignment.id], exchange=world.exchange)
        world.run("-m", "nbgrader", "generate_assignment", assignment.id, cwd=world.course_dir)
        world.run("-m", "nbgrader", "release_assignment", assignment.id, cwd=world.course_dir)

        def prepare(student: str, i: int) -> Path:
            account = accounts[student] = students.user(student)
            workdir = students.workdir(account)
            students.run(account, "-m", "nbgrader", "fetch_assignment", assignment.id, *world.exchange_args,
                         f"--student={student}", cwd=workdir)
            path = workdir / assignment.id / f"{exercise.folder}.ipynb"
            notebook = nbformat.read(path, as_version=4)
            (cell,) = [c for c in notebook.cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == answer_cell_id(exercise)]
            cell.source = reference if i % 2 == 0 or not variants else variants[i // 2 % len(variants)]
            nbformat.write(notebook, path)
            return workdir

        def submit_and_wait(student: str, workdir: Path) -> float:
            students.run(accounts[student], "-m", "nbgrader", "submit", assignment.id, *world.exchange_args,
                         f"--student={student}", cwd=workdir)
            submitted = time.perf_counter()
            cache = Path(tmp) / "homes" / accounts[student] / ".local/share/jupyter/nbgrader_cache" / course_id
            (secret_file,) = cache.glob(f"{student}+{assignment.id}+*/submission_secret.txt")
            digest = hashlib.md5(secret_file.read_text().encode() + exercise.folder.encode()).hexdigest()  # noqa: S324
            page = world.exchange / course_id / "feedback" / f"{digest}.html"
            while not (page.exists() and "Graded at" in page.read_text(encoding="utf-8", errors="replace")):
                time.sleep(0.02)
            latency = time.perf_counter() - submitted
            # Also from the submission landing in the inbound folder (its secret is written
            # last) to the page: `nbgrader submit` itself often returns after the page is there.
            (inbound,) = (world.exchange / course_id / "inbound").glob(f"{student}+{assignment.id}+*")
            graded[student] = page.stat().st_mtime - (inbound / "submission_secret.txt").stat().st_mtime
            return latency

        graded: dict[str, float] = {}
        singles = {f"single{i:02d}": prepare(f"single{i:02d}", i) for i in range(args.singles)}
        burst = {f"burst{i:03d}": prepare(f"burst{i:03d}", i) for i in range(args.burst)}
        roster = Path(tmp) / "roster.csv"
        roster.write_text("student_id,unix_user\n" + "".join(f"{s},{a}\n" for s, a in accounts.items()))
        watch = subprocess.Popen([sys.executable, "-m", "grader", "watch", "--exchange", str(world.exchange),
                                  "-e", exercise.id, "--db", str(Path(tmp) / "grades.db"), "--per-hour", "1000",
                                  "--roster", str(roster)],
                                 cwd=REPO, env=world.env, stderr=subprocess.PIPE, text=True)
        try:
            line = watch.stderr.readline()  # "watching ..." once the references are computed
            if not line.startswith("watching"):
                watch.kill()  # its stderr ends only when it does
                raise SystemExit(f"grader watch did not start: {line}{watch.stderr.read()}")
            single_s = [submit_and_wait(s, w) for s, w in singles.items()]
            print(f"  (singles: {', '.join(f'{x:.2f}' for x in single_s)} s)", flush=True)
            # nbgrader's cycle over the singles' submissions, before the burst is submitted
            # (the watch is idle meanwhile: it only looks at the inbound folder).
            cycle = {step: world.run("-m", "nbgrader", step, assignment.id, cwd=world.course_dir)
                     for step in ("collect", "autograde", "generate_feedback")}
            with ThreadPoolExecutor(max_workers=8) as pool:
                burst_s = list(pool.map(lambda item: submit_and_wait(*item), burst.items()))
            # Released last: once nbgrader's final feedback is out, watch leaves the
            # assignment alone (it never writes over released feedback). It releases
            # the singles' feedback only (the only feedback generated).
            cycle["release_feedback"] = world.run("-m", "nbgrader", "release_feedback", assignment.id,
                                                  cwd=world.course_dir)
        finally:
            watch.terminate()
            watch.wait()
    nb_total = sum(cycle.values())
    n_cycle = args.singles
    print(f"exercise {exercise.id}, feedback from `nbgrader submit` returning to fetchable; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  grader watch, one at a time (n={len(single_s)}): median {statistics.median(single_s):6.2f} s, "
          f"max {max(single_s):6.2f} s")
    landed = [graded[s] for s in graded if s.startswith("single")]
    print(f"    from landing in inbound to the page: median {statistics.median(landed):6.2f} s, max {max(landed):6.2f} s")
    if burst_s:
        print(f"  grader watch, burst of {len(burst_s)}: median {statistics.median(burst_s):6.2f} s, "
              f"max {max(burst_s):6.2f} s")
        landed = [graded[s] for s in graded if s.startswith("burst")]
        print(f"    from landing in inbound to the page: median {statistics.median(landed):6.2f} s, "
              f"max {max(landed):6.2f} s")
    floor = 0.05  # below this (the page was there before submit returned) a ratio says nothing
    print(f"  nbgrader manual cycle over the {n_cycle} singles: {nb_total:6.1f} s ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in cycle.items()) + ")")
    print(f"    -> a single submission: nbgrader's cycle {nb_total:.1f} s vs ours "
          f"{statistics.median(single_s):.2f} s: {nb_total / max(floor, statistics.median(single_s)):.0f}x"
          + (" (ours under 0.05 s: ratio against 0.05 s)" if statistics.median(single_s) < floor else ""))
    if burst_s:
        estimate = nb_total / n_cycle * len(burst_s)
        print(f"    -> the burst: nbgrader's cycle ~{estimate:.0f} s (its per-submission time x {len(burst_s)}, "
              f"extrapolated) vs our slowest {max(burst_s):.1f} s: {estimate / max(floor, max(burst_s)):.0f}x")


if __name__ == "__main__":
    main()
