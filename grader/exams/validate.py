"""The exams' check that ``load_course`` runs (registered by
grader/exams/__init__.py; the course model loads the question bank itself):
the exams against the course and the bank: exercises and questions exist,
expressions and placeholders only use names the variant defines, computed
answers name known computations, and sample variants draw without errors.
"""
from __future__ import annotations

from pathlib import Path

from grader.course.exam_schema import Exam, Question
from grader.course.model import Course, _duplicates
from grader.exams import expr
from grader.exams.questions import placeholders

Problems = list[tuple[str, str]]
_SAMPLE_STUDENTS = 16
_SAMPLE_SECRET = b"validation-only-secret, never used for a real exam"


def check_exams(course: Course, root: Path, check_files: bool) -> Problems:
    """The exams' check that ``load_course`` runs (registered by
    grader/exams/__init__.py); the bank is already loaded into ``course``."""
    if not course.exams and not course.exam_settings.questions:
        return []
    return _computation_problems(course) or exam_problems(course, root, check_files=check_files)


def _computation_problems(course: Course) -> Problems:
    """Computed answers name a known computation, of a known exercise."""
    from grader.exams.reference_calc import COMPUTATIONS

    name = course.exam_settings.questions
    exercise_ids = {e.id for e in course.exercises}
    problems = []
    for i, question in enumerate(course.questions.values()):
        if question.compute is not None:
            calc = COMPUTATIONS.get(question.compute.name)
            if calc is None:
                problems.append((f"{name}: questions[{i}].compute.name",
                                 f"unknown computation {question.compute.name!r} (known: {', '.join(sorted(COMPUTATIONS))})"))
            elif calc.exercise is not None and calc.exercise not in exercise_ids:
                problems.append((f"{name}: questions[{i}].compute.name", f"runs the reference of unknown exercise {calc.exercise!r}"))
    return problems


def _names_problems(where: str, text: str | int | float, known: set[str]) -> Problems:
    if not isinstance(text, str):
        return []
    try:
        unknown = expr.names(text) - known
    except expr.ExprError as exc:
        return [(where, str(exc))]
    return [(where, f"unknown name(s) {', '.join(sorted(unknown))} (known here: {', '.join(sorted(known)) or 'none'})")] if unknown else []


def _spec_problems(where: str, specs: dict, known: set[str]) -> Problems:
    from grader.exams.variants import draw_order

    problems = []
    for name, spec in specs.items():
        if not name.isidentifier():
            problems.append((f"{where}.{name}", "a size name must be an identifier"))
        for part in ("min", "max", "expr"):
            problems += _names_problems(f"{where}.{name}.{part}", getattr(spec, part), known | set(specs) - {name})
    if not problems:
        try:
            draw_order(specs, known)
        except ValueError as exc:
            problems.append((where, str(exc)))
    return problems


def _question_problems(where: str, question: Question, sizes: set[str]) -> Problems:
    problems = _spec_problems(f"{where} params", question.params, sizes)
    known = sizes | set(question.params)
    texts = [("text.en", question.text.en), ("text.zh", question.text.zh)]
    for j, choice in enumerate(question.choices):
        texts += [(f"choices[{j}]", choice.text)] if isinstance(choice.text, str) else \
            [(f"choices[{j}].en", choice.text.en), (f"choices[{j}].zh", choice.text.zh)]
    texts += [(f"accept[{j}]", a) for j, a in enumerate(question.accept)]
    for part, text in texts:
        try:
            unknown = placeholders(text) - known
        except ValueError as exc:
            problems.append((f"{where} {part}", f"bad placeholder: {exc}"))
            continue
        if unknown:
            problems.append((f"{where} {part}", f"unknown placeholder(s) {', '.join(sorted(unknown))} "
                                                f"(known here: {', '.join(sorted(known)) or 'none'})"))
    answers = question.answer if isinstance(question.answer, list) else [question.answer]
    for value in answers:
        problems += _names_problems(f"{where} answer", value, known)
    if question.compute is not None:
        for arg, value in question.compute.args.items():
            problems += _names_problems(f"{where} compute.args.{arg}", value, known)
    return problems


def _exam_problems(course: Course, i: int, exam: Exam, root: Path, check_files: bool) -> Problems:
    problems: Problems = []
    where = f"exams[{i}]"
    exercise_ids = {e.id for e in course.exercises}
    if not exam.exercises and not exam.questions:
        problems.append((where, "an exam needs exercises or questions"))
    for j, entry in enumerate(exam.exercises):
        if entry.id not in exercise_ids:
            problems.append((f"{where}.exercises[{j}].id", f"unknown exercise {entry.id!r}"))
    for dup in _duplicates([e.id for e in exam.exercises]):
        problems.append((f"{where}.exercises", f"exercise {dup!r} is listed more than once"))
    for dup in _duplicates(exam.questions):
        problems.append((f"{where}.questions", f"question {dup!r} is listed more than once"))
    problems += _spec_problems(f"{where}.variant", exam.variant, set())
    sizes = set(exam.variant)
    from grader.exams.checks import SIZES_USED

    for j, entry in enumerate(exam.exercises):
        missing = [name for name in SIZES_USED.get(entry.id, ()) if name not in sizes]
        if missing:
            problems.append((f"{where}.exercises[{j}]", f"the exam checks of {entry.id} use size(s) "
                                                        f"{', '.join(missing)}, which the variant does not define"))
    for j, question_id in enumerate(exam.questions):
        if question_id not in course.questions:
            problems.append((f"{where}.questions[{j}]", f"unknown question {question_id!r}"))
            continue
        question = course.question(question_id)
        problems += _question_problems(f"{where}.questions[{j}] ({question_id}):", question, sizes)
        if check_files and question.compute is not None:
            from grader.exams.reference_calc import COMPUTATIONS

            calc = COMPUTATIONS.get(question.compute.name)
            if calc is not None and calc.exercise in exercise_ids:
                exercise = course.exercise(calc.exercise)
                if not (root / "solutions" / exercise.folder / exercise.module).is_file():
                    problems.append((f"{where}.questions[{j}]", f"its answer runs solutions/{exercise.folder}/"
                                                                f"{exercise.module}, which does not exist"))
    return problems or _draw_problems(course, where, exam)


def _draw_problems(course: Course, where: str, exam: Exam) -> Problems:
    """Draw sample variants and show every question: catches empty ranges,
    divisions by zero and formatting errors before a real exam does."""
    from grader.exams.questions import _key, shown_questions
    from grader.exams.variants import make_variant

    for n in range(_SAMPLE_STUDENTS):
        try:
            variant = make_variant(course, exam, f"sample-{n}", _SAMPLE_SECRET)
            shown_questions(course, exam, variant)
            for question_id in exam.questions:
                if course.question(question_id).compute is None:
                    _key(course.question(question_id), variant, {})
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return [(where, f"a sample variant cannot be drawn: {exc}")]
    return []


def _unused_question_problems(course: Course) -> Problems:
    """Questions that no exam asks yet, checked against every name some
    exam's variant defines: a placeholder or expression that no variant (nor
    the question's own params) defines would break the first exam to use it."""
    asked = {qid for exam in course.exams for qid in exam.questions}
    sizes = {name for exam in course.exams for name in exam.variant}
    name = course.exam_settings.questions or "question bank"
    problems: Problems = []
    for qid, question in course.questions.items():
        if qid not in asked:
            problems += _question_problems(f"{name}: {qid} (in no exam yet):", question, sizes)
    return problems


def exam_problems(course: Course, root: Path, *, check_files: bool = True) -> Problems:
    """Every problem of every exam (the bank is already loaded into ``course``),
    and of the bank's questions that no exam asks yet."""
    problems = [("exams", f"exam id {dup!r} is declared more than once") for dup in _duplicates([e.id for e in course.exams])]
    for i, exam in enumerate(course.exams):
        problems += _exam_problems(course, i, exam, root, check_files)
    return problems + _unused_question_problems(course)
