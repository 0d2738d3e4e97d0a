"""`python bench/watch_latency.py --hostile`: the others' feedback latency
under `grader watch`, quiet and beside hostile students, side by side.

A plain folder is watched (`grader watch SUBS --feedback DIR`). Each
measured student prepares their folder elsewhere and renames it in (atomic),
then waits for their page to say "Graded at". Phase one: alone. Phase two:
beside three hostile students, there before and touched all along:

- ``hsparse``: a 4 GiB sparse file beside the module (a copy writes 4 GiB);
- ``hfolders``: 100,000 empty folders beside the module;
- ``hfifo``: a named pipe beside the module (a copy blocks or fails forever).
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WITHIN = 2.0   # the hostile median may be at most this times the quiet one


def _drop(stage: Path, subs: Path, student: str, source: str, module: str, folder: str) -> float:
    """The student's folder, made aside and renamed in; when it landed."""
    made = stage / student / folder
    made.mkdir(parents=True)
    (made / module).write_text(source)
    os.rename(stage / student, subs / student)
    return time.perf_counter()


def _wait_graded(page: Path, deadline_s: float = 300.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < deadline_s:
        try:
            if "Graded at" in page.read_text(encoding="utf-8", errors="replace"):
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"no feedback at {page} after {deadline_s:.0f} s")


def _hostile(subs: Path, stage: Path, exercise, source: str, folders: int) -> None:
    for name in ("hsparse", "hfolders", "hfifo"):
        (stage / name / exercise.folder).mkdir(parents=True)
        (stage / name / exercise.folder / exercise.module).write_text(source)
    with open(stage / "hsparse" / exercise.folder / "weights.bin", "wb") as fh:
        fh.truncate(4 << 30)
    many = stage / "hfolders" / exercise.folder
    for i in range(folders):
        (many / f"d{i:06d}").mkdir()
    os.mkfifo(stage / "hfifo" / exercise.folder / "notes")
    for name in ("hsparse", "hfolders", "hfifo"):
        os.rename(stage / name, subs / name)


def _keep_touching(subs: Path, stop: threading.Event) -> None:
    """The hostile students hand in again and again: a new file each round."""
    round_ = 0
    while not stop.wait(0.3):
        round_ += 1
        for name in ("hsparse", "hfolders", "hfifo"):
            try:
                (subs / name / f"again{round_ % 2}.txt").write_text(str(round_))
            except OSError:
                pass


def _phase(label: str, n: int, subs: Path, stage: Path, feedback: Path, exercise, source: str) -> list[float]:
    latencies = []
    for i in range(n):
        student = f"{label}{i:02d}"
        landed = _drop(stage, subs, student, source, exercise.module, exercise.folder)
        latencies.append(_wait_graded(feedback / student / "feedback.html") - landed)
    return latencies


def hostile_comparison(exercise, students: int, folders: int) -> int:
    """Print quiet and hostile latencies; 1 when the hostile median is over 2x the quiet one."""
    source = (REPO / "solutions" / exercise.folder / exercise.module).read_text()
    tmp = Path(tempfile.mkdtemp(prefix="bench-watch-hostile-"))
    subs, stage, feedback = tmp / "subs", tmp / "stage", tmp / "feedback"
    subs.mkdir(), stage.mkdir()
    watch = subprocess.Popen([sys.executable, "-m", "grader", "watch", str(subs), "-e", exercise.id, "--db",
                              str(tmp / "grades.db"), "--feedback", str(feedback), "--per-hour", "100000"],
                             cwd=REPO, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    try:
        line = watch.stderr.readline()
        if not line.startswith("watching"):
            watch.kill()
            raise SystemExit(f"grader watch did not start: {line}{watch.stderr.read()}")
        threading.Thread(target=lambda: [None for _ in watch.stderr], daemon=True).start()  # keep it drained
        quiet = _phase("quiet", students, subs, stage, feedback, exercise, source)
        made = time.perf_counter()
        _hostile(subs, stage, exercise, source, folders)
        made = time.perf_counter() - made
        toucher = threading.Thread(target=_keep_touching, args=(subs, stop), daemon=True)
        toucher.start()
        hostile = _phase("beside", students, subs, stage, feedback, exercise, source)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        stop.set()
        watch.terminate()
        watch.wait()
    q, h = statistics.median(quiet), statistics.median(hostile)
    print(f"exercise {exercise.id}, plain folder, from the folder landing to its page (n={students} each); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"  hostile students: 4 GiB sparse file, {folders} empty folders, a FIFO, each touched every 0.3 s "
          f"(made in {made:.1f} s)")
    print(f"  {'':8}{'quiet':>10}{'hostile':>10}")
    print(f"  {'median':8}{q:9.2f}s{h:9.2f}s   ratio {h / q:.2f} (at most {WITHIN:.0f}x)")
    print(f"  {'max':8}{max(quiet):9.2f}s{max(hostile):9.2f}s", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)   # after the figures: 100,000 folders take a while
    return 0 if h <= WITHIN * q else 1
