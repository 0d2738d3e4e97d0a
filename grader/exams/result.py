"""One student's exam, graded: :class:`ExamResult`, its points before and
after the late policy, and its status. Plain data: made by
grader/exams/grading.py, rebuilt from the gradebook by grader/exams/records.py,
summed up by grader/exams/stats.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from grader.exams.answers import QuestionVerdict
from grader.exams.timing import Lateness

UNREADABLE = "unreadable"


@dataclass
class ExamResult:
    student: str
    sizes: dict
    questions: list[QuestionVerdict]
    exercises: dict[str, dict]          # exercise id -> result (empty when code was not graded)
    lateness: Lateness
    problems: list[str] = field(default_factory=list)
    code_graded: bool = False
    code_max: float = 0.0
    submitted: bool = True
    error: str = ""                     # why the student's exam could not be read (status unreadable)

    @property
    def status(self) -> str:
        """``not_submitted``, ``unreadable`` (see ``error``), ``late`` or ``graded``."""
        if self.error:
            return UNREADABLE
        return "not_submitted" if not self.submitted else "late" if self.lateness.flagged else "graded"

    @property
    def question_points(self) -> float:
        return round(sum(v.points for v in self.questions), 6)

    @property
    def question_max(self) -> float:
        return round(sum(v.max_points for v in self.questions), 6)

    @property
    def code_points(self) -> float:
        return round(sum(e["points"] for e in self.exercises.values()), 6)

    @property
    def raw_points(self) -> float:
        return round(self.question_points + self.code_points, 6)

    @property
    def max_points(self) -> float:
        return round(self.question_max + (self.code_max if self.code_graded else 0.0), 6)

    @property
    def points(self) -> float:
        """After the late policy."""
        return round(self.raw_points * self.lateness.factor, 6)

    def to_dict(self) -> dict:
        return {"student": self.student, "sizes": self.sizes, "points": self.points, "max_points": self.max_points,
                "raw_points": self.raw_points, "question_points": self.question_points,
                "question_max": self.question_max, "code_points": self.code_points,
                "code_max": self.code_max, "code_graded": self.code_graded, "submitted": self.submitted,
                "status": self.status, "error": self.error, "lateness": self.lateness.to_dict(),
                "questions": [v.to_dict() for v in self.questions], "exercises": self.exercises,
                "problems": self.problems}
