"""What grading an exercise gives: one :class:`Verdict` per hidden check,
and the :class:`ExerciseResult` that holds them (grader/judge.py makes them).
Everything a student may see in them is fixed text or ids the grader chose."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from grader.course import Text


@dataclass
class Verdict:
    """One check's outcome. Everything but ``instructor_detail`` is fixed
    text or ids the grader chose, and may be shown to the student."""

    check_id: str
    passed: bool
    points: float
    max_points: float
    message: Text          # what was checked (no hidden value)
    reason: str = ""       # why it failed (fixed words: no hidden value, no student text)
    pitfalls: list[str] = field(default_factory=list)   # hints to show: confirmed first, then possible
    confirmed: list[str] = field(default_factory=list)  # variants that fail exactly like this
    possible: list[str] = field(default_factory=list)   # variants with this failure's signature (at most 2)
    kind: str = ""         # the failure's signature kind ("wrong values", "raised ValueError", "not_run", ...)
    # The raw error, bounded: for the instructor's eyes only (never exported
    # to results.json, the student's page, Gradescope or nbgrader).
    instructor_detail: str = ""

    def to_dict(self) -> dict:
        # Not dataclasses.asdict: it deep-copies the message model only for it
        # to be replaced (~0.3 ms of the grader's main thread per submission).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(message=self.message.model_dump(), pitfalls=list(self.pitfalls),
                    confirmed=list(self.confirmed), possible=list(self.possible))
        return data


@dataclass
class ExerciseResult:
    exercise_id: str
    # "graded", "not_started", "not_submitted", or the sandbox's status when the run broke
    status: str
    reason: str            # the cause that broke the run, once, in fixed words and both languages
    verdicts: list[Verdict]
    max_points: float
    # Feedback figures: name -> {"title", "student", "expected"} (2-D lists).
    figures: dict = field(default_factory=dict)
    detail: str = ""       # the sandbox's own account of the run: instructor only

    @property
    def points(self) -> float:
        return round(sum(v.points for v in self.verdicts), 6)

    @property
    def pitfalls(self) -> list[str]:
        return list(dict.fromkeys(p for v in self.verdicts if not v.passed for p in v.pitfalls))
