"""``grader watch``: grade each submission as it arrives, with the sandbox
kept warm, into the same gradebook as ``grader grade``, and put its feedback
where the student fetches it.

The loop: poll the sources; note new or changed submissions as pending
(grader/watch/state.py); start the fairest pending ones that the hourly
limit allows, up to ``jobs`` at once (one per student at a time); record
each finished one (this thread is the only writer of the gradebook), write
its feedback, mark it done. A submission already graded for its content is
not graded again (results are keyed by content, as in ``grader grade``):
a restarted watch resumes where it stopped.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from grader.course import Course, Exercise
from grader.gradebook import Gradebook, Key
from grader.run.grading import MISSING_HASH
from grader.judge import ExerciseResult, Judge
from grader.intake.submissions import ExerciseSubmission, collect
from grader.watch import feedback
from grader.watch.sources import Arrival
from grader.watch.state import HOUR_S, WatchState, fair_order

_IGNORED_IN_COPY = shutil.ignore_patterns("submission_secret.txt", ".*")


@dataclass
class Job:
    """One submission being graded."""

    arrival: Arrival
    exercises: list[Exercise]
    keys: list[Key]
    parts: list[tuple[Key, ExerciseSubmission]]        # still to grade
    problems: list[str] = field(default_factory=list)
    future: Future | None = None


@dataclass
class WatchOptions:
    per_hour: int
    jobs: int = 2
    poll_s: float = 0.5
    once: bool = False            # stop when nothing is left that may be graded now
    feedback_dir: Path | None = None   # for a plain folder's students


class Watch:
    """One ``grader watch`` run over some sources."""

    def __init__(self, course: Course, sources: list, exercises_for, gradebook: Gradebook, state: WatchState,
                 judge: Judge, workdir: Path, options: WatchOptions, root: Path, out: TextIO = sys.stderr) -> None:
        self.course, self.sources, self.exercises_for = course, sources, exercises_for
        self.gradebook, self.state, self.judge = gradebook, state, judge
        self.workdir, self.options, self.root, self.out = workdir, options, root, out
        self.pool = ThreadPoolExecutor(max_workers=max(1, options.jobs), thread_name_prefix="watch")
        self.in_flight: dict[str, Job] = {}       # source id -> job
        self.held: set[str] = set()               # told "queued" (held by the hourly limit)
        self.graded = 0
        self._serial = 0
        self._last_line = ""

    # -- the loop ---------------------------------------------------------------

    def run(self) -> int:
        """Watch until interrupted (or, with ``once``, until idle); the number graded."""
        try:
            while True:
                arrivals = {a.source_id: a for source in self.sources for a in source.poll()}
                for arrival in arrivals.values():
                    if self.state.seen(arrival.source_id, arrival.student, arrival.fingerprint):
                        self.held.discard(arrival.source_id)
                waiting = self._start_what_may_start(arrivals)
                self._progress(waiting)
                if self.options.once and not self.in_flight and not self._startable(arrivals):
                    return self.graded
                self._collect_finished(timeout=self.options.poll_s)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self._progress(len(self.state.pending()), final=True)

    def _startable(self, arrivals: dict[str, Arrival]) -> bool:
        now = time.time()
        return any(p.source_id in arrivals and self._allowance(p.student, now)[0] > 0
                   for p in self.state.pending())

    def _start_what_may_start(self, arrivals: dict[str, Arrival]) -> int:
        """Start jobs up to the limit; the number of pending submissions."""
        pending = self.state.pending()
        self._supersede(pending, arrivals)
        pending = [p for p in self.state.pending() if p.source_id in arrivals]
        busy = {job.arrival.student for job in self.in_flight.values()}
        now = time.time()
        for item in fair_order(pending, self.state.last_served(), busy):
            if len(self.in_flight) >= self.options.jobs:
                break
            left, free_at = self._allowance(item.student, now)
            arrival = arrivals[item.source_id]
            if left <= 0:
                self._tell_held(arrival, free_at)
                continue
            self._start(arrival)
        return len(pending)

    def _allowance(self, student: str, now: float) -> tuple[int, float]:
        """Graded submissions left this hour, and when the next one frees up."""
        used = self.state.graded_in_last_hour(student, now)
        left = self.options.per_hour - len(used)
        return left, (used[0] + HOUR_S if used and left <= 0 else now)

    def _supersede(self, pending, arrivals: dict[str, Arrival]) -> None:
        """Of a student's pending nbgrader submissions of one assignment,
        only the newest is graded: the others say so."""
        newest: dict[tuple[str, str], Arrival] = {}
        for item in pending:
            arrival = arrivals.get(item.source_id)
            if arrival is None or arrival.nbgrader is None or item.source_id in self.in_flight:
                continue
            group = (arrival.student, arrival.nbgrader.assignment)
            older = newest.get(group)
            if older is None or (arrival.nbgrader.timestamp, arrival.source_id) > \
                    (older.nbgrader.timestamp, older.source_id):
                newest[group] = arrival
                if older is not None:
                    self._finish_superseded(older, arrival)
            else:
                self._finish_superseded(arrival, older)

    def _finish_superseded(self, old: Arrival, new: Arrival) -> None:
        note = (f"Not graded: you submitted again at {new.nbgrader.timestamp} before this one's turn came; "
                "the newest submission is the one graded.")
        self._write_notes(old, "Superseded by a newer submission", note)
        self.state.finish(old.source_id, old.fingerprint, counted=False, status="superseded", note=note)

    def _tell_held(self, arrival: Arrival, free_at: float) -> None:
        if arrival.source_id in self.held:
            return
        self.held.add(arrival.source_id)
        when = time.strftime("%H:%M UTC", time.gmtime(free_at))
        note = (f"Queued: you have had {self.options.per_hour} graded submission(s) in the last hour, the most "
                f"this course allows. This one will be graded after {when}; a newer submission replaces it.")
        self._write_notes(arrival, "Queued", note)

    # -- one submission -----------------------------------------------------------

    def _start(self, arrival: Arrival) -> None:
        self._serial += 1
        stage = Path(tempfile.mkdtemp(prefix=f"stage{self._serial}-", dir=self.workdir))
        target = stage / (arrival.path.name if arrival.nbgrader is None else arrival.student)
        try:
            if arrival.path.is_dir():
                shutil.copytree(arrival.path, target, symlinks=True, ignore=_IGNORED_IN_COPY)
            else:
                shutil.copy2(arrival.path, target, follow_symlinks=False)
        except OSError as exc:  # removed or unreadable while we looked: the next poll decides
            shutil.rmtree(stage, ignore_errors=True)
            self.out.write(f"watch: cannot copy {arrival.path.name}: {exc.strerror}\n")
            return
        exercises = self.exercises_for(arrival)
        found = collect(stage, self.course, exercises, self.workdir / f"collect{self._serial}", self.root)
        shutil.rmtree(stage, ignore_errors=True)
        job = Job(arrival, exercises, [], [])
        for submission in found:
            job.problems += submission.problems
            for part in submission.exercises.values():
                key = Key(arrival.student, part.exercise.id, part.content_hash or MISSING_HASH,
                          self.course.course.version)
                job.keys.append(key)
                if not self.gradebook.has(key):
                    job.parts.append((key, part))
        if not job.keys or not exercises:  # nothing gradable: an unknown assignment, a bad id, an unreadable zip
            reasons = "; ".join(job.problems) or "no exercise of this course in it"
            note = f"Not graded: {reasons}."
            self._write_notes(arrival, "Not graded", note)
            self.state.finish(arrival.source_id, arrival.fingerprint, counted=False, note=note)
            return
        self.in_flight[arrival.source_id] = job
        job.future = self.pool.submit(self._judge, job)

    def _judge(self, job: Job) -> list[tuple[Key, ExerciseSubmission, ExerciseResult]]:
        """In a worker thread: the sandboxed runs and the verdicts (no gradebook)."""
        judge_dir = self.workdir / "judge"
        return [(key, part, self.judge.grade(part.exercise, part.folder, judge_dir)) for key, part in job.parts]

    def _collect_finished(self, timeout: float) -> None:
        futures = {job.future: job for job in self.in_flight.values()}
        if not futures:
            time.sleep(timeout)
            return
        done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            job = futures[future]
            del self.in_flight[job.arrival.source_id]
            for key, part, result in future.result():  # a broken grader raises here: the watch stops
                self.gradebook.record(key, points=result.points, max_points=result.max_points,
                                      status=result.status, reason=part.problem or result.reason,
                                      verdicts=[v.to_dict() for v in result.verdicts], figures=result.figures)
            counted = bool(job.parts)
            self.graded += counted
            self.held.discard(job.arrival.source_id)
            self._write_feedback(job, counted)
            self.state.finish(job.arrival.source_id, job.arrival.fingerprint, counted=counted)

    # -- feedback -----------------------------------------------------------------

    def _write_feedback(self, job: Job, counted: bool) -> None:
        records = {r.key.exercise: r for r in (self.gradebook.get(k) for k in job.keys) if r is not None}
        left, _ = self._allowance(job.arrival.student, time.time())
        left -= counted  # this one is not marked done yet
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        note = f"Graded at {when}. Graded submissions left this hour: {max(0, left)} of {self.options.per_hour}."
        if not counted:
            note = f"Already graded: the same files as an earlier submission. {note}"
        mean = self._class_mean()
        arrival = job.arrival
        if arrival.nbgrader is not None:
            by_folder = {e.folder: e for e in job.exercises}
            for notebook_id in arrival.nbgrader.notebooks:
                exercise = by_folder.get(notebook_id)
                if exercise is None:
                    continue
                rows = {exercise.id: records[exercise.id]} if exercise.id in records else {}
                page = feedback.graded_page(self.course, arrival.student, [exercise], rows, mean, note)
                feedback.write_page(feedback.nbgrader_feedback_path(arrival, notebook_id), page)
        elif self.options.feedback_dir is not None:
            page = feedback.graded_page(self.course, arrival.student, job.exercises, records, mean, note)
            feedback.write_page(feedback.plain_feedback_path(self.options.feedback_dir, arrival.student), page)

    def _write_notes(self, arrival: Arrival, title: str, note: str) -> None:
        if arrival.nbgrader is not None:
            for notebook_id in arrival.nbgrader.notebooks:
                feedback.write_page(feedback.nbgrader_feedback_path(arrival, notebook_id),
                                    feedback.note_page(arrival.student, title, note))
        elif self.options.feedback_dir is not None:
            feedback.write_page(feedback.plain_feedback_path(self.options.feedback_dir, arrival.student),
                                feedback.note_page(arrival.student, title, note))

    def _class_mean(self) -> dict[str, float]:
        sums: dict[str, list[float]] = defaultdict(list)
        for record in self.gradebook.records(self.course.course.version):
            sums[record.key.exercise].append(record.points / record.max_points if record.max_points else 0.0)
        return {exercise: sum(v) / len(v) for exercise, v in sums.items()}

    # -- progress -----------------------------------------------------------------

    def _progress(self, waiting: int, final: bool = False) -> None:
        held = len(self.held)
        line = (f"watch: {max(0, waiting - len(self.in_flight))} queued ({held} held by the hourly limit), "
                f"{len(self.in_flight)} grading, {self.graded} graded")
        if line == self._last_line and not (final and self.out.isatty()):
            return
        self._last_line = line
        if self.out.isatty():
            self.out.write(f"\r\x1b[K{line}" + ("\n" if final else ""))
        else:
            self.out.write(line + "\n")
        self.out.flush()
