"""One ``grader watch`` run, from the command line's options to the loop
(grader/watch/run.py), with the same exit codes as ``grader grade``."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grader.checks.inputs import GradingSecretError, HiddenInputs, load_grading_secret
from grader.course import CourseError, load_course
from grader.gradebook import Gradebook, GradebookError
from grader.judge import GraderError, Judge
from grader.sandbox import Limits, Sandbox, SandboxError
from grader.run.grading import settled_heap
from grader.run.session import EXIT_BAD_INPUT, EXIT_GRADEBOOK, EXIT_GRADER_BROKEN, EXIT_OK
from grader.watch.run import Watch, WatchOptions
from grader.watch.sources import Arrival, NbgraderInbound, PlainFolder
from grader.watch.state import WatchState


def run_watch(folder: Path | None, *, exchange: Path | None, nbgrader_course: str | None, db: Path,
              feedback_dir: Path | None, jobs: int, per_hour: int | None, assignment: str | None,
              exercise_ids: list[str], once: bool, course_path: Path, roster_path: Path | None = None) -> int:
    from grader.intake.identity import RosterError, read_roster

    err = sys.stderr
    try:
        course = load_course(course_path)
    except CourseError as exc:
        err.write(f"{exc}\n")
        return EXIT_BAD_INPUT
    if folder is None and exchange is None:
        err.write("grader watch: give a submissions folder, --exchange, or both\n")
        return EXIT_BAD_INPUT
    try:
        roster = read_roster(roster_path) if roster_path is not None else None
    except RosterError as exc:
        err.write(f"{exc}\n")
        return EXIT_BAD_INPUT
    assignments = {a.id: a for a in course.assignments}
    if assignment and assignment not in assignments:
        err.write(f"--assignment: no assignment {assignment!r}; course.yaml has: {', '.join(assignments)}\n")
        return EXIT_BAD_INPUT
    unknown = [i for i in exercise_ids if i not in {e.id for e in course.exercises}]
    if unknown:
        err.write(f"--exercise: unknown exercise(s) {', '.join(unknown)}\n")
        return EXIT_BAD_INPUT
    if assignment:
        plain_exercises = [course.exercise(i) for i in assignments[assignment].exercises]
    else:
        plain_exercises = list(course.exercises)
    if exercise_ids:
        plain_exercises = [e for e in plain_exercises if e.id in exercise_ids]
    course_id = nbgrader_course or (course.release.get("nbgrader") or {}).get("course_id") or course.course.id

    def exercises_for(arrival: Arrival):
        if arrival.nbgrader is None:
            return plain_exercises
        chosen = assignments.get(arrival.nbgrader.assignment)
        if chosen is None or (assignment and chosen.id != assignment):
            return []
        return [course.exercise(i) for i in chosen.exercises if not exercise_ids or i in exercise_ids]

    sources: list = []
    if folder is not None:
        sources.append(PlainFolder(folder, settle=not once, roster=roster))
    if exchange is not None:
        sources.append(NbgraderInbound(exchange, course_id, roster))
    watched = plain_exercises if folder is not None else []
    if exchange is not None:
        watched += [course.exercise(i) for a in course.assignments if not assignment or a.id == assignment
                    for i in a.exercises if not exercise_ids or i in exercise_ids]
    limits = Limits.from_grading(course.grading)
    options = WatchOptions(per_hour=per_hour or course.watch.submissions_per_hour, jobs=jobs,
                           poll_s=course.watch.poll_s, once=once, feedback_dir=feedback_dir)
    root = course_path.resolve().parent
    try:   # hidden inputs per submission (grader/checks/inputs.py)
        inputs = HiddenInputs(load_grading_secret(root))
    except GradingSecretError as exc:
        err.write(f"{exc}\n")
        return EXIT_BAD_INPUT
    try:
        with Gradebook(db) as gradebook, Sandbox(limits) as sandbox, \
                tempfile.TemporaryDirectory(prefix="watch-") as workdir:
            state = WatchState(db)
            judge = Judge(course, sandbox, root, inputs)
            # Warm: the references and the pitfall variants on the fixed
            # inputs, before the first student waits for them: each
            # submission's own inputs take the fixed checks' results from
            # them (for 11, whose variants each train a copy task, that was
            # ~15 s on the first failure).
            for exercise in {e.id: e for e in watched}.values():
                judge.expected(exercise, Path(workdir) / "judge")
                judge.variant_results(exercise, Path(workdir) / "judge")
            names = [str(folder)] if folder is not None else []
            names += [f"{exchange}/{course_id}/inbound"] if exchange is not None else []
            err.write(f"watching {' and '.join(names)}; {options.per_hour} graded submission(s) per student "
                      f"and hour; gradebook {db}\n")
            try:
                with settled_heap():
                    Watch(course, sources, exercises_for, gradebook, state, judge, Path(workdir), options, root).run()
            except KeyboardInterrupt:
                err.write("\nwatch: stopped; a restart resumes where it stopped\n")
            finally:
                state.close()
    except GradebookError as exc:
        err.write(f"gradebook error: {exc}\n")
        return EXIT_GRADEBOOK
    except (GraderError, SandboxError) as exc:
        err.write(f"the grader cannot grade: {exc}\n")
        return EXIT_GRADER_BROKEN
    return EXIT_OK
