"""The models of course.yaml's ``exam_settings`` and ``exams``, and of the
question bank file ``exam_settings.questions`` names. Their deeper checks
(expressions, placeholders, draws) live in grader/exams/validate.py, which
load_course runs as a registered check; the course's own models are in
grader/course/model.py."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator, model_validator

from grader.course.late_policy import LatePolicy  # noqa: F401  (shared with homework: grader/course/late_policy.py)
from grader.course.schema_base import Text, _Strict


Number = int | float


class SizeSpec(_Strict):
    """How one size (or question parameter) of a variant is drawn: one of
    ``choices``, an integer in ``min``..``max`` (ints or expressions over
    other sizes, e.g. ``"seq_len + 2"``), or computed (``expr``)."""

    choices: list[Number] | None = Field(None, min_length=1)
    min: int | str | None = None
    max: int | str | None = None
    expr: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "SizeSpec":
        kinds = [self.choices is not None, self.min is not None or self.max is not None, self.expr is not None]
        if sum(kinds) != 1:
            raise ValueError("give exactly one of: choices, min and max, expr")
        if kinds[1] and (self.min is None or self.max is None):
            raise ValueError("a range needs both min and max")
        if isinstance(self.min, int) and isinstance(self.max, int) and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self


class ExamExercise(_Strict):
    id: str
    points: float = Field(gt=0)


class Exam(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_-]+$")
    title: Text
    # When everyone starts (timezone required); a per-student start in the
    # collection metadata overrides it. See grader/exams/timing.py.
    starts_at: datetime | None = None
    time_limit_min: float = Field(gt=0)
    late_policy: LatePolicy = LatePolicy()
    # Its share of the course grade in LMS exports (grader/report/lms.py); None: its points as they are.
    weight: float | None = Field(None, gt=0)
    exercises: list[ExamExercise] = []
    questions: list[str] = []
    # Sizes drawn per student; one may use others (drawn after them).
    variant: dict[str, SizeSpec] = {}

    @field_validator("starts_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("give a timezone, e.g. 2026-04-20T09:00:00+08:00")
        return value


class ExamSettings(_Strict):
    # The question bank (holds the answers: instructor-only), relative to course.yaml.
    questions: str | None = None
    # The secret that variants are derived from: this environment variable,
    # else this file (relative to course.yaml; never committed).
    secret_env: str = "GRADER_EXAM_SECRET"
    secret_file: str | None = None


class Choice(_Strict):
    text: str | Text            # a plain string when it reads the same in both languages
    correct: bool = False

    @model_validator(mode="before")
    @classmethod
    def _en_zh_shorthand(cls, data: object) -> object:
        # Long choices read better as `- en: ...` / `zh: ...` than nested under text.
        if isinstance(data, dict) and "text" not in data and ("en" in data or "zh" in data):
            data = dict(data)
            data["text"] = {key: data.pop(key) for key in ("en", "zh") if key in data}
        return data


class Tolerance(_Strict):
    abs: float = Field(0.0, ge=0)
    rel: float = Field(0.0, ge=0)


class Compute(_Strict):
    """A numeric answer computed by running a reference solution (see
    grader/exams/reference_calc.py); args are numbers or expressions."""

    name: str
    args: dict[str, Number | str] = {}


class Question(_Strict):
    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    kind: Literal["choice", "numeric", "short"]
    text: Text                  # may use {size} and {param} placeholders
    points: float = Field(1.0, gt=0)
    concepts: list[str] = []    # where the seeds teach it
    params: dict[str, SizeSpec] = {}
    choices: list[Choice] = []  # kind choice
    shuffle: bool = True        # kind choice: order drawn per student
    answer: Number | list[Number] | str | None = None   # kind numeric: a value or an expression
    compute: Compute | None = None                      # kind numeric: run the reference
    tolerance: Tolerance = Tolerance()
    accept: list[str] = []      # kind short: accepted answers (case, spaces and width ignored)
    explanation: Text | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> "Question":
        if self.kind == "choice":
            if len(self.choices) < 2 or not any(c.correct for c in self.choices):
                raise ValueError("a choice question needs at least 2 choices, one of them correct")
        elif self.choices:
            raise ValueError(f"a {self.kind} question has no choices")
        if self.kind == "numeric" and (self.answer is None) == (self.compute is None):
            raise ValueError("a numeric question needs exactly one of answer, compute")
        if self.kind != "numeric" and (self.answer is not None or self.compute is not None):
            raise ValueError(f"a {self.kind} question has no answer/compute (choice: mark a choice correct; short: accept)")
        if (self.kind == "short") != bool(self.accept):
            raise ValueError("accept is for short questions, and a short question needs it")
        return self


class QuestionBank(_Strict):
    schema_version: Literal[1]
    questions: list[Question]
