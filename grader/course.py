"""Load and validate ``course.yaml`` into a :class:`Course`.

Two layers of checks, both reported with the field path they concern:
the schema (pydantic: types, required fields, unknown keys) and the
cross-references (pitfall ids exist, assignments name real exercises, the
exercise and solution folders and the pitfall variants are where the course
says they are).
"""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COURSE_FILE = REPO_ROOT / "course.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Strict):
    """A text in English and Chinese."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)


class Pitfall(_Strict):
    id: str = Field(pattern=r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$")
    source: str
    hint: Text
    error_patterns: list[str] = []

    @field_validator("error_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
        return patterns


class ExercisePitfall(_Strict):
    id: str
    # Set when public tests cannot catch this pitfall: the reason, in words.
    # The grader's hidden checks must catch it instead.
    hidden_only: str | None = None


class Exercise(_Strict):
    id: str = Field(pattern=r"^\d\d$")
    slug: str = Field(pattern=r"^[a-z0-9_]+$")
    part: Literal["A", "B"]
    title: Text
    summary: Text
    module: str = Field(pattern=r"^[a-z_][a-z0-9_]*\.py$")
    symbols: list[str] = Field(min_length=1)
    points: float = Field(gt=0)
    forbidden: list[str] = []
    seeds: list[str] = []
    pitfalls: list[ExercisePitfall] = []
    # Earlier exercises whose reference module this folder ships as working
    # code (so a student stuck on 06 can still do 09). Kept identical to the
    # reference by `grader sync-shipped`; a test checks it.
    ships: list[str] = []

    @property
    def folder(self) -> str:
        """``NN_slug``: the folder name under exercises/ and solutions/."""
        return f"{self.id}_{self.slug}"

    @property
    def module_name(self) -> str:
        return self.module.removesuffix(".py")


class Assignment(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_-]+$")
    title: Text
    exercises: list[str] = Field(min_length=1)


class CourseMeta(_Strict):
    id: str
    version: str
    title: Text


class GradingLimits(_Strict):
    timeout_s: float = Field(gt=0)
    cpu_s: float = Field(gt=0)
    memory_mb: int = Field(ge=256)
    output_limit_kb: int = Field(gt=0)
    threads: int = Field(ge=1, le=8)


# ---------------------------------------------------------------- exams
# The models of course.yaml's ``exam_settings`` and ``exams``, and of the
# question bank file ``exam_settings.questions`` names. Their deeper checks
# (expressions, placeholders, draws) live in grader/exams/validate.py.

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


class LatePolicy(_Strict):
    """What a submission after the time limit (plus ``grace_min``) gets:
    ``accept`` (flagged only), ``penalty`` (the score times
    ``1 - penalty_per_min * minutes late``, at least 0) or ``zero``.
    Later than ``max_late_min``: zero, whatever the action."""

    action: Literal["accept", "penalty", "zero"] = "penalty"
    grace_min: float = Field(0.0, ge=0)
    penalty_per_min: float = Field(0.0, ge=0, le=1)
    max_late_min: float | None = Field(None, ge=0)


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


class Course(_Strict):
    schema_version: Literal[1]
    course: CourseMeta
    grading: GradingLimits
    release: dict = {}
    pitfalls: list[Pitfall]
    exercises: list[Exercise]
    assignments: list[Assignment] = []
    exam_settings: ExamSettings = ExamSettings()
    exams: list[Exam] = []
    # The question bank, loaded by load_course from exam_settings.questions.
    _questions: dict[str, Question] = PrivateAttr(default_factory=dict)

    @property
    def questions(self) -> dict[str, Question]:
        return self._questions

    def question(self, question_id: str) -> Question:
        try:
            return self._questions[question_id]
        except KeyError:
            raise KeyError(f"no question {question_id!r} in the question bank") from None

    def exam(self, exam_id: str) -> Exam:
        for exam in self.exams:
            if exam.id == exam_id:
                return exam
        raise KeyError(f"no exam {exam_id!r} in course.yaml")

    def exercise(self, exercise_id: str) -> Exercise:
        for exercise in self.exercises:
            if exercise.id == exercise_id:
                return exercise
        raise KeyError(f"no exercise {exercise_id!r} in course.yaml")

    def pitfall(self, pitfall_id: str) -> Pitfall:
        for pitfall in self.pitfalls:
            if pitfall.id == pitfall_id:
                return pitfall
        raise KeyError(f"no pitfall {pitfall_id!r} in course.yaml")


class CourseError(Exception):
    """course.yaml is invalid; ``problems`` lists ``(field path, message)``."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]):
        self.path = path
        self.problems = problems
        lines = [f"{path}: {len(problems)} problem(s)"]
        lines += [f"  {where}: {message}" for where, message in problems]
        super().__init__("\n".join(lines))


def _field_path(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _error_message(err: dict) -> str:
    value = err.get("input")
    if isinstance(value, (str, int, float)) and err["type"] != "missing":
        return f"{err['msg']} (got {value!r})"
    return err["msg"]


def _duplicates(ids: list[str]) -> set[str]:
    return {i for i in ids if ids.count(i) > 1}


def _cross_reference_problems(course: Course) -> list[tuple[str, str]]:
    problems = []
    pitfall_ids = {p.id for p in course.pitfalls}
    exercise_ids = [e.id for e in course.exercises]
    for dup in _duplicates([p.id for p in course.pitfalls]):
        problems.append(("pitfalls", f"pitfall id {dup!r} is declared more than once"))
    for dup in _duplicates(exercise_ids):
        problems.append(("exercises", f"exercise id {dup!r} is declared more than once"))
    for i, exercise in enumerate(course.exercises):
        for j, entry in enumerate(exercise.pitfalls):
            if entry.id not in pitfall_ids:
                problems.append((f"exercises[{i}].pitfalls[{j}].id", f"unknown pitfall {entry.id!r}"))
        for j, shipped in enumerate(exercise.ships):
            if shipped not in exercise_ids or shipped >= exercise.id:
                problems.append((f"exercises[{i}].ships[{j}]", f"{shipped!r} is not an earlier exercise"))
    for i, assignment in enumerate(course.assignments):
        for j, exercise_id in enumerate(assignment.exercises):
            if exercise_id not in exercise_ids:
                problems.append((f"assignments[{i}].exercises[{j}]", f"unknown exercise {exercise_id!r}"))
    return problems


def _file_problems(course: Course, root: Path) -> list[tuple[str, str]]:
    # Imported here: the variants module needs a validated Course.
    from grader.pitfalls import VariantError, load_variants

    problems = []
    for i, exercise in enumerate(course.exercises):
        missing = [root / side / exercise.folder / exercise.module for side in ("exercises", "solutions")]
        missing = [module for module in missing if not module.is_file()]
        problems += [(f"exercises[{i}].module", f"{module.relative_to(root)} does not exist") for module in missing]
        if missing:
            continue  # the variants are edits of the reference: nothing to check them against
        try:
            variants = load_variants(exercise, root)
        except VariantError as exc:
            problems.append((f"exercises[{i}].pitfalls", str(exc)))
            continue
        declared = {entry.id for entry in exercise.pitfalls}
        for missing in sorted(declared - set(variants)):
            j = [entry.id for entry in exercise.pitfalls].index(missing)
            problems.append((f"exercises[{i}].pitfalls[{j}]", f"no variant for {missing!r} in grader/pitfalls/{exercise.folder}.yaml"))
        for extra in sorted(set(variants) - declared):
            problems.append((f"exercises[{i}].pitfalls", f"grader/pitfalls/{exercise.folder}.yaml has a variant for {extra!r}, which the exercise does not list"))
    return problems


def shipped_copies(course: Course, root: Path = REPO_ROOT) -> list[tuple[Path, Path]]:
    """(reference module, its copy in a later exercise folder) pairs."""
    pairs = []
    for exercise in course.exercises:
        for shipped_id in exercise.ships:
            source = course.exercise(shipped_id)
            pairs.append((root / "solutions" / source.folder / source.module,
                          root / "exercises" / exercise.folder / source.module))
    return pairs


def load_course(path: Path | str = DEFAULT_COURSE_FILE, *, check_files: bool = True) -> Course:
    """Read, validate and return the course. Raises :class:`CourseError`
    listing every problem found, each with its field path."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CourseError(path, [("(file)", f"cannot read: {exc.strerror}")]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        raise CourseError(path, [(where, f"not valid YAML: {getattr(exc, 'problem', exc)}")]) from exc
    try:
        course = Course.model_validate(data)
    except ValidationError as exc:
        problems = [(_field_path(err["loc"]), _error_message(err)) for err in exc.errors()]
        raise CourseError(path, problems) from exc
    problems = _cross_reference_problems(course)
    if check_files and not problems:
        problems = _file_problems(course, path.resolve().parent)
    if not problems:
        problems = _exam_problems(course, path.resolve().parent, check_files)
    if problems:
        raise CourseError(path, problems)
    return course


def _exam_problems(course: Course, root: Path, check_files: bool) -> list[tuple[str, str]]:
    """Load the question bank into ``course`` and check the exams. Last, so
    that an exam is only checked against exercises that are sound."""
    if not course.exams and not course.exam_settings.questions:
        return []
    # Imported here: the exam checks need a Course.
    from grader.exams.validate import exam_problems, load_question_bank

    questions, problems = load_question_bank(course, root)
    course._questions = questions
    return problems or exam_problems(course, root, check_files=check_files)
