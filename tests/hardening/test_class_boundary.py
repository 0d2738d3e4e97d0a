"""The class run's boundaries, in process with a judge that raises for one
student: the class goes on, that student's result says the grader failed
(never the exception's text), and the next run grades it again; a
GraderError (the grader cannot grade anyone) still stops the run."""
from __future__ import annotations

import time

import pytest

from grader.gradebook import Gradebook
from grader.run.grading import GRADER_ERROR, grade_class
from grader.course import Text
from grader.judge import ExerciseResult, GraderError, Verdict

MODULE = "def softmax(x, dim=-1):\n    return x\n"


class FlakyJudge:
    """Full marks for everyone, except that it raises ``error`` for ``victim``."""

    def __init__(self, victim: str, error: Exception | None):
        self.victim, self.error, self.calls = victim, error, []

    def expected(self, exercise, workdir):
        return None

    def grade(self, exercise, folder, workdir):
        self.calls.append(folder.parent.name)
        if folder.parent.name == self.victim and self.error is not None:
            raise self.error
        return ExerciseResult(exercise.id, "graded", "", [Verdict("c", True, exercise.points, exercise.points, Text(en="m", zh="m"))],
                              exercise.points)


@pytest.fixture
def class_dir(tmp_path):
    for student in ("amy", "ben", "cy"):
        (tmp_path / "subs" / student / "01_softmax").mkdir(parents=True)
        (tmp_path / "subs" / student / "01_softmax" / "softmax.py").write_text(MODULE + f"# {student}\n")
    return tmp_path


def _grade(course, tmp_path, judge, book):
    return grade_class(course, [course.exercise("01")], tmp_path / "subs", book, judge, tmp_path / "work")


def test_a_judging_that_raises_is_that_students_result_and_is_graded_again(course, class_dir):
    with Gradebook(class_dir / "grades.db") as book:
        run = _grade(course, class_dir, FlakyJudge("ben", KeyError("secret student text")), book)
        by_student = {k.student: book.get(k) for k in run.keys}
        assert by_student["amy"].points == by_student["cy"].points == 10
        assert by_student["ben"].status == GRADER_ERROR and by_student["ben"].points == 0
        assert "KeyError" in by_student["ben"].reason and "secret" not in by_student["ben"].reason
        again = FlakyJudge("ben", None)
        run = _grade(course, class_dir, again, book)
        assert again.calls == ["ben"] and run.resumed == 2
        assert book.get(next(k for k in run.keys if k.student == "ben")).points == 10


def test_a_grader_error_still_stops_the_run(course, class_dir):
    with Gradebook(class_dir / "grades.db") as book, pytest.raises(GraderError):
        _grade(course, class_dir, FlakyJudge("ben", GraderError("the reference fails")), book)


class BrokenReference:
    """A judge whose reference fails its own checks after a while (as a run
    takes); like :class:`grader.judge.Judge`, each grading asks for the
    reference after the submission's own run."""

    def __init__(self):
        self.graded = []

    def expected(self, exercise, workdir):
        time.sleep(0.2)
        raise GraderError("the reference of 01_softmax fails its own hidden checks")

    def grade(self, exercise, folder, workdir):
        self.graded.append(folder.parent.name)
        time.sleep(0.05)
        self.expected(exercise, workdir)


def test_a_reference_that_fails_stops_the_class_without_running_the_rest(course, tmp_path):
    # The references run first in the queue, beside the first submissions;
    # one that fails stops the class: the submissions not yet started never
    # start (each would wait for the reference, then fail the same way).
    for i in range(30):
        (tmp_path / "subs" / f"s{i:02d}" / "01_softmax").mkdir(parents=True)
        (tmp_path / "subs" / f"s{i:02d}" / "01_softmax" / "softmax.py").write_text(MODULE + f"# {i}\n")
    judge = BrokenReference()
    with Gradebook(tmp_path / "grades.db") as book:
        with pytest.raises(GraderError, match="fails its own hidden checks"):
            grade_class(course, [course.exercise("01")], tmp_path / "subs", book, judge, tmp_path / "work", jobs=2)
        assert list(book.records(course.course.version)) == []
    assert len(judge.graded) <= 2
