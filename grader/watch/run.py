"""``grader watch``: grade each submission as it arrives, with the sandbox
kept warm, into the same gradebook as ``grader grade``, and put its feedback
where the student fetches it.

The loop: poll the sources; note new or changed submissions as pending
(grader/watch/state.py), and refuse at once those whose source does not
prove who handed them in (kept, listed for the instructor, never graded,
never superseding or counting against anyone); start the fairest pending
ones that the hourly limit allows (one per identity at a time). A started
submission is first read by intake's bounded readers in a worker thread
(never copied: a sparse file, a FIFO or 100,000 folders cost the loop
nothing and end as that student's recorded reason), then judged in another,
up to ``jobs`` at once. This thread records each finished one (it is the
only writer of the gradebook), writes its feedback, marks it done. A
submission already graded for its content is not graded again (results are
keyed by content, as in ``grader grade``): a restarted watch resumes where
it stopped. Nothing is retried without a bound: every submission started
ends done, with a result or a reason.
"""
from __future__ import annotations

import itertools
import shutil
import sys
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from grader.course import Course, Exercise
from grader.gradebook import Gradebook, Key
from grader.run.grading import MISSING_HASH, unreadable_verdicts
from grader.judge import ExerciseResult, Judge
from grader.intake.errors import UNREADABLE, internal_reason
from grader.intake.names import visible
from grader.intake.submissions import ExerciseSubmission, Submission, collect
from grader.watch import feedback
from grader.watch.sources import Arrival
from grader.watch.state import HOUR_S, WatchState, fair_order


@dataclass
class Job:
    """One submission being graded."""

    arrival: Arrival
    exercises: list[Exercise]
    keys: list[Key]
    parts: list[tuple[Key, ExerciseSubmission]]        # still to grade
    problems: list[str] = field(default_factory=list)
    future: Future | None = None
    judging: bool = False     # read (in the preparing pool), now judged
    serial: int = 0           # its folder of prepared modules: <workdir>/collect<serial>


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
        # Reading submissions: its own threads, so one student's slow folder
        # holds one of these, never the loop or a judging slot.
        self.preparing_slots = max(2, options.jobs)
        self.prepare_pool = ThreadPoolExecutor(max_workers=self.preparing_slots, thread_name_prefix="watch-read")
        self.in_flight: dict[str, Job] = {}       # source id -> job
        self.held: set[str] = set()               # told "queued" (held by the hourly limit)
        self.graded = 0
        self.refused = 0
        self._serial = itertools.count(1)
        self._last_line = ""
        self._released: set[str] = set()          # nbgrader assignments whose final feedback is out
        self._told: set[str] = set()

    # -- the loop ---------------------------------------------------------------

    def run(self) -> int:
        """Watch until interrupted (or, with ``once``, until idle); the number graded."""
        try:
            while True:
                arrivals = {a.source_id: a for source in self.sources for a in source.poll()}
                for arrival in arrivals.values():
                    if self.state.seen(arrival.source_id, arrival.identity or arrival.student, arrival.fingerprint):
                        self.held.discard(arrival.source_id)
                        if arrival.refusal:
                            self._refuse(arrival)
                self._tell_lookalikes(arrivals)
                waiting = self._start_what_may_start(arrivals)
                self._progress(waiting)
                if self.options.once and not self.in_flight and not self._startable(arrivals):
                    return self.graded
                self._collect_finished(timeout=self.options.poll_s)
        finally:
            self.prepare_pool.shutdown(wait=True, cancel_futures=True)
            self.pool.shutdown(wait=True, cancel_futures=True)
            self._progress(len(self.state.pending()), final=True)

    def _refuse(self, arrival: Arrival) -> None:
        """Not proved to be the named student's: kept where it is, listed for
        the instructor, and no page written (its secret is the sender's, so
        a page would go to whoever forged it)."""
        note = f"Not graded: who handed it in is not proved: {arrival.refusal}."
        self.state.finish(arrival.source_id, arrival.fingerprint, counted=False, status="refused", note=note)
        self.refused += 1
        self.out.write(f"watch: refused {visible(arrival.path.name)}: {note} It is kept; grade it by hand "
                       "if it is the student's.\n")

    def _tell_lookalikes(self, arrivals: dict[str, Arrival]) -> None:
        """Two sources of one identity (``mallory`` and ``Mallory.``): they
        share one limit; the instructor is told once."""
        from grader.intake.identity import lookalike_groups, lookalike_note

        for ids in lookalike_groups(a.student for a in arrivals.values() if not a.refusal):
            key = "\0".join(ids)
            if key not in self._told:
                self._told.add(key)
                self.out.write(f"watch: {lookalike_note(ids)}; they share one hourly limit\n")

    def _startable(self, arrivals: dict[str, Arrival]) -> bool:
        now = time.time()
        return any(p.source_id in arrivals and not arrivals[p.source_id].refusal
                   and self._allowance(p.student, now)[0] > 0 for p in self.state.pending())

    def _start_what_may_start(self, arrivals: dict[str, Arrival]) -> int:
        """Start jobs up to the limit; the number of pending submissions."""
        proved = {k: a for k, a in arrivals.items() if not a.refusal}
        for item in self.state.pending():   # pending from before a restart, not proved now
            if item.source_id in arrivals and item.source_id not in proved:
                self._refuse(arrivals[item.source_id])
        self._supersede(self.state.pending(), proved)
        pending = [p for p in self.state.pending() if p.source_id in proved]
        busy = {job.arrival.identity or job.arrival.student for job in self.in_flight.values()}
        now = time.time()
        for item in fair_order(pending, self.state.last_served(), busy):
            preparing = sum(not job.judging for job in self.in_flight.values())
            if preparing >= self.preparing_slots or len(self.in_flight) >= self.options.jobs + self.preparing_slots:
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
            group = (arrival.identity or arrival.student, arrival.nbgrader.assignment)
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
        exercises = self.exercises_for(arrival)
        if arrival.nbgrader is not None and exercises and self._final_feedback_out(arrival):
            note = (f"Not graded by watch: nbgrader's final feedback for {arrival.nbgrader.assignment} has been "
                    "released; watch writes no feedback over it.")
            self.state.finish(arrival.source_id, arrival.fingerprint, counted=False, status="not graded", note=note)
            self.out.write(f"watch: {visible(arrival.path.name)}: {note}\n")
            return
        job = Job(arrival, exercises, [], [])
        if not exercises:  # an unknown assignment: nothing to read
            self._finish_unread(job, "no exercise of this course in it")
            return
        self.in_flight[arrival.source_id] = job
        job.serial = next(self._serial)
        job.future = self.prepare_pool.submit(self._prepare, job)

    def _prepare(self, job: Job) -> list[Submission]:
        """In a reading thread: the submission through intake's bounded
        readers (grader/intake: no copy, no link followed, every size and
        count checked), its modules put into folders to judge."""
        arrival = job.arrival
        return collect(self.workdir, self.course, job.exercises, self.workdir / f"collect{job.serial}", self.root,
                       sources={arrival.student: arrival.path})

    def _prepared(self, job: Job) -> None:
        """Back in this thread: what to judge, or the reason there is nothing."""
        try:
            found = job.future.result()
        except Exception as exc:  # noqa: BLE001 - one student's files never stop the watch
            self.out.write(f"watch: {visible(job.arrival.path.name)}: {type(exc).__name__}: {visible(str(exc))}\n")
            self._finish_unread(job, internal_reason(exc))
            return
        for submission in found:
            job.problems += submission.problems
            for problem in submission.problems:   # the details the student's page leaves out
                self.out.write(f"watch: {visible(job.arrival.path.name)}: {visible(problem, 300)}\n")
            for part in submission.exercises.values():
                key = Key(submission.student, part.exercise.id, part.content_hash or MISSING_HASH,
                          self.course.course.version)
                job.keys.append(key)
                if not self.gradebook.has(key):
                    job.parts.append((key, part))
        if not job.keys:
            self._finish_unread(job, "; ".join(job.problems) or "no exercise of this course in it")
            return
        if any(part.status != UNREADABLE for _, part in job.parts):
            job.judging = True
            job.future = self.pool.submit(self._judge, job)
            return
        self._finish(job, [])   # nothing to judge: unreadable, or already graded for these files

    def _finish_unread(self, job: Job, reasons: str) -> None:
        self.in_flight.pop(job.arrival.source_id, None)
        shutil.rmtree(self.workdir / f"collect{job.serial}", ignore_errors=True)
        note = f"Not graded: {reasons}."
        self._write_notes(job.arrival, "Not graded", note)
        self.state.finish(job.arrival.source_id, job.arrival.fingerprint, counted=False, note=note)

    def _judge(self, job: Job) -> list[tuple[Key, ExerciseSubmission, ExerciseResult]]:
        """In a worker thread: the sandboxed runs and the verdicts (no gradebook)."""
        judge_dir = self.workdir / "judge"
        return [(key, part, self.judge.grade(part.exercise, part.folder, judge_dir)) for key, part in job.parts
                if part.status != UNREADABLE]

    def _collect_finished(self, timeout: float) -> None:
        futures = {job.future: job for job in self.in_flight.values()}
        if not futures:
            time.sleep(timeout)
            return
        done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            job = futures[future]
            if not job.judging:
                self._prepared(job)
            else:
                self._finish(job, future.result())  # a broken grader raises here: the watch stops

    def _finish(self, job: Job, results: list[tuple[Key, ExerciseSubmission, ExerciseResult]]) -> None:
        del self.in_flight[job.arrival.source_id]
        shutil.rmtree(self.workdir / f"collect{job.serial}", ignore_errors=True)   # the grader's own copies
        for key, part in job.parts:
            if part.status == UNREADABLE:   # handed in, not readable: its reason is the result, as in grade
                self.gradebook.record(key, points=0.0, max_points=part.exercise.points, status=UNREADABLE,
                                      reason=part.problem, verdicts=unreadable_verdicts(part))
        for key, part, result in results:
            self.gradebook.record(key, points=result.points, max_points=result.max_points,
                                  status=result.status, reason=part.problem or result.reason,
                                  verdicts=[v.to_dict() for v in result.verdicts], figures=result.figures)
        counted = bool(job.parts)
        self.graded += counted
        self.held.discard(job.arrival.source_id)
        self._write_feedback(job, counted)
        self.state.finish(job.arrival.source_id, job.arrival.fingerprint, counted=counted)

    def _final_feedback_out(self, arrival: Arrival) -> bool:
        """Whether nbgrader's own feedback for this assignment is in the
        exchange: a page at any of its submissions' feedback names that
        watch did not write (``nbgrader release_feedback``'s)."""
        assignment = arrival.nbgrader.assignment
        if assignment in self._released:
            return True
        for source in self.sources:
            for other in getattr(source, "last", {}).values():
                if other.nbgrader is None or other.nbgrader.assignment != assignment:
                    continue
                for notebook_id in other.nbgrader.notebooks:
                    if not feedback.ours_or_absent(feedback.nbgrader_feedback_path(other, notebook_id), self.state):
                        self._released.add(assignment)
                        return True
        return False

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
                self._write(feedback.nbgrader_feedback_path(arrival, notebook_id), page)
        elif self.options.feedback_dir is not None:
            page = feedback.graded_page(self.course, arrival.student, job.exercises, records, mean, note)
            self._write(feedback.plain_feedback_path(self.options.feedback_dir, arrival.student), page)

    def _write_notes(self, arrival: Arrival, title: str, note: str) -> None:
        if arrival.nbgrader is not None:
            for notebook_id in arrival.nbgrader.notebooks:
                self._write(feedback.nbgrader_feedback_path(arrival, notebook_id),
                            feedback.note_page(arrival.student, title, note))
        elif self.options.feedback_dir is not None:
            self._write(feedback.plain_feedback_path(self.options.feedback_dir, arrival.student),
                        feedback.note_page(arrival.student, title, note))

    def _write(self, path: Path, html) -> None:
        """Write a page, unless a page watch did not write is there
        (nbgrader's released feedback, the instructor's): that is left as it is."""
        if not feedback.write_owned_page(path, html, self.state) and str(path) not in self._told:
            self._told.add(str(path))
            self.out.write(f"watch: left {path} as it is: it holds feedback watch did not write\n")

    def _class_mean(self) -> dict[str, float]:
        sums: dict[str, list[float]] = defaultdict(list)
        for record in self.gradebook.records(self.course.course.version):
            sums[record.key.exercise].append(record.points / record.max_points if record.max_points else 0.0)
        return {exercise: sum(v) / len(v) for exercise, v in sums.items()}

    # -- progress -----------------------------------------------------------------

    def _progress(self, waiting: int, final: bool = False) -> None:
        held = len(self.held)
        line = (f"watch: {max(0, waiting - len(self.in_flight))} queued ({held} held by the hourly limit), "
                f"{len(self.in_flight)} grading, {self.graded} graded"
                + (f", {self.refused} refused (not proved to be the named student's)" if self.refused else ""))
        if line == self._last_line and not (final and self.out.isatty()):
            return
        self._last_line = line
        if self.out.isatty():
            self.out.write(f"\r\x1b[K{line}" + ("\n" if final else ""))
        else:
            self.out.write(line + "\n")
        self.out.flush()
