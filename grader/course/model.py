"""Load and validate ``course.yaml`` into a :class:`Course`.

Two layers of checks, both reported with the field path they concern:
the schema (pydantic: types, required fields, unknown keys) and the
cross-references (pitfall ids exist, assignments name real exercises, the
exercise and solution folders and the pitfall variants are where the course
says they are). The question bank is loaded with the same schema. What a
feature above the course model adds (the exams' expressions, placeholders and
sample draws) is checked by the checks that feature registers
(:func:`register_course_check`): this module imports nothing above it.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator

from grader.course.exam_schema import Exam, ExamSettings, Question, QuestionBank
from grader.course.late_policy import LatePolicy
from grader.course.schema_base import Text, _Strict

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_COURSE_FILE = REPO_ROOT / "course.yaml"


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
    part: Literal["A", "B", "C", "D"]
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
    # When it is due (timezone required), and what lateness costs: the exams'
    # policy model and rule (grader/course/late_policy.py). Per-student extensions:
    # grader grade --extensions; see grader/run/deadlines.py.
    due: datetime | None = None
    late_policy: LatePolicy = LatePolicy()
    # Its share of the course grade in LMS exports (grader/report/lms.py);
    # None: its points as they are.
    weight: float | None = Field(None, gt=0)

    @field_validator("due")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("give a timezone, e.g. 2026-03-20T23:59:00+08:00")
        return value


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


class WatchSettings(_Strict):
    """``grader watch``: feedback while students still work."""
    # Graded submissions per student and rolling hour; later ones wait (and
    # their feedback says so): resubmitting cannot probe the hidden checks fast.
    submissions_per_hour: int = Field(default=6, ge=1)
    poll_s: float = Field(default=0.5, gt=0, le=60)


class Course(_Strict):
    schema_version: Literal[1]
    course: CourseMeta
    grading: GradingLimits
    watch: WatchSettings = WatchSettings()
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


# "{name}" or "{name:.3f}": a placeholder, as exam questions use them.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)(?:[:!][^{}]*)?\}")


def _hint_placeholder_problems(course: Course) -> list[tuple[str, str]]:
    """Hints are shown as written, with no variant to fill them: a
    placeholder in one would reach students as "{vocab}"."""
    return [(f"pitfalls[{i}].hint.{language}", f"placeholder {{{name}}} is never filled: hints are shown as written")
            for i, pitfall in enumerate(course.pitfalls) for language in ("en", "zh")
            for name in _PLACEHOLDER.findall(getattr(pitfall.hint, language))]


def _cross_reference_problems(course: Course) -> list[tuple[str, str]]:
    problems = _hint_placeholder_problems(course)
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
    weighted = [x.weight is not None for x in [*course.assignments, *course.exams]]
    if any(weighted) and not all(weighted):
        problems.append(("assignments", "give a weight to every assignment and exam, or to none: the course "
                                        "total of the exports adds weighted shares, and an unweighted item has none"))
    assignment_of: dict[str, int] = {}
    for i, assignment in enumerate(course.assignments):
        for j, exercise_id in enumerate(assignment.exercises):
            if exercise_id not in exercise_ids:
                problems.append((f"assignments[{i}].exercises[{j}]", f"unknown exercise {exercise_id!r}"))
            elif exercise_id in assignment_of:
                other = course.assignments[assignment_of[exercise_id]].id
                problems.append((f"assignments[{i}].exercises[{j}]", f"exercise {exercise_id!r} is already in assignment {other!r}"))
            else:
                assignment_of[exercise_id] = i
    # A shipped module is a working solution: it may reach students only once
    # its own assignment is over, so it must come from an earlier assignment.
    for i, exercise in enumerate(course.exercises):
        here = assignment_of.get(exercise.id)
        for j, shipped in enumerate(exercise.ships):
            there = assignment_of.get(shipped)
            if here is not None and there is not None and there >= here:
                problems.append((f"exercises[{i}].ships[{j}]",
                                 f"{shipped!r} is in assignment {course.assignments[there].id!r}, not in one before "
                                 f"{course.assignments[here].id!r}: students would get its solution before its deadline"))
    return problems


def _file_problems(course: Course, root: Path) -> list[tuple[str, str]]:
    # Imported here: the variants module needs a validated Course.
    from grader.course.pitfalls import VariantError, load_variants

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


# libyaml's parser when PyYAML has it: the pure-Python one took ~0.2 s of
# every course load (14 files), which every grading command pays at start-up.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

def read_course(path: Path, *, check_files: bool = True) -> Course:
    """Read, validate and return the course. Raises :class:`CourseError`
    listing every problem found, each with its field path. Commands call
    :func:`grader.course.load_course`, which reads it once per process."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)  # noqa: S506 (a safe loader)
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
        # Last, so that exams are only checked against exercises that are sound.
        course._questions, problems = _question_bank(course, path.resolve().parent)
    if not problems:
        problems = _registered_problems(course, path.resolve().parent, check_files)
    if problems:
        raise CourseError(path, problems)
    return course


# A check of what a feature adds to the course: (course, its folder,
# check_files) -> problems. Run by load_course once the course's own checks pass.
CourseCheck = Callable[[Course, Path, bool], list[tuple[str, str]]]
_COURSE_CHECKS: dict[str, CourseCheck] = {}


def register_course_check(name: str, check: CourseCheck) -> None:
    """Have :func:`load_course` run ``check`` after its own checks (once per
    ``name``: registering again replaces it). A feature above the course
    model registers here when it is imported (grader/exams/__init__.py), so
    the course model never imports it."""
    _COURSE_CHECKS[name] = check


def _question_bank(course: Course, root: Path) -> tuple[dict[str, Question], list[tuple[str, str]]]:
    """The bank named by ``exam_settings.questions`` (an empty one when none is),
    validated by its schema, with field paths prefixed by its file name."""
    name = course.exam_settings.questions
    if name is None:
        if any(exam.questions for exam in course.exams):
            return {}, [("exam_settings.questions", "exams ask questions, but no question bank is named")]
        return {}, []
    path = root / name
    try:
        # The C loader when there is one: this runs at every course load.
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        return {}, [("exam_settings.questions", f"{name}: cannot read: {exc.strerror}")]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}: line {mark.line + 1}" if mark else name
        return {}, [(where, f"not valid YAML: {getattr(exc, 'problem', exc)}")]
    try:
        bank = QuestionBank.model_validate(data)
    except ValidationError as exc:
        return {}, [(f"{name}: {_field_path(err['loc'])}", _error_message(err)) for err in exc.errors()]
    problems = [(f"{name}: questions", f"question id {dup!r} is declared more than once")
                for dup in _duplicates([q.id for q in bank.questions])]
    return {q.id: q for q in bank.questions}, problems


def _registered_problems(course: Course, root: Path, check_files: bool) -> list[tuple[str, str]]:
    """The problems the first registered check that finds any reports."""
    for check in _COURSE_CHECKS.values():
        problems = check(course, root, check_files)
        if problems:
            return problems
    return []
