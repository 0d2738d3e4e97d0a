"""``grader adjust``: one adjustment made, or the history shown, from the
command line's options to a line on the terminal and an exit status. Kept
apart from grader/cli/ so that the CLI only parses options."""
from __future__ import annotations

import sys
from pathlib import Path

from grader.course import CourseError, load_course
from grader.gradebook.adjustments import AdjustmentRefused, current_user, history_lines, make_adjustment, when
from grader.gradebook.store import Gradebook, GradebookError

EXIT_BAD_INPUT = 2


def run_adjust(db: Path, course_path: Path, student: str | None, exercise: str | None, *, points: float | None,
               delta: float | None, clear: bool, reason: str, made_by: str | None, list_only: bool) -> int:
    """Record one adjustment (or, with ``list_only``, print the history):
    0 when done, 2 when refused (the option named) or the course or the
    gradebook cannot be read."""
    try:
        course = load_course(course_path, check_files=False)
        with Gradebook(db) as book:
            if list_only:
                lines = history_lines(book, student)
                print("\n".join(lines) if lines else f"{db}: no adjustment or regrade"
                      + (f" of {student}" if student else ""))
                return 0
            if not student or not exercise:
                raise AdjustmentRefused("give STUDENT and EXERCISE (or --list)")
            made, now = make_adjustment(book, course, student, exercise, points=points, delta=delta, clear=clear,
                                        reason=reason, made_by=made_by or current_user())
            pushed_times = {a.id: book.pushed_at(a.id) for a in course.assignments}
    except AdjustmentRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (CourseError, GradebookError) as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_INPUT
    before = now.graded_points if now.graded_points is not None else now.points
    print(f"{student} {exercise}: {made.change()} by {made.made_by} ({made.reason}); "
          f"now {now.points:g}/{now.max_points:g} (graded {before:g})")
    for assignment in course.assignments:
        pushed = pushed_times.get(assignment.id)
        if exercise in assignment.exercises and pushed is not None:
            print(f"note: {assignment.id} was pushed to nbgrader at {when(pushed)}, before this adjustment: run "
                  f"`grader push nbgrader {assignment.id}` again, then `nbgrader generate_feedback --force`, "
                  "so that nbgrader and the released feedback show it", file=sys.stderr)
    return 0
