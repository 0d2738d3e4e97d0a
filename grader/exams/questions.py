"""A question as one student sees it (text with the variant's numbers, choices
in the variant's order, lettered a, b, c, ...) and its answer key for that
student (correct letters, the reference's number, accepted words)."""
from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course, Text
from grader.course.exam_schema import Exam, Question, Tolerance
from grader.exams.expr import Number, evaluate
from grader.exams.variants import Variant

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def placeholders(template: str) -> set[str]:
    """The names ``{name}`` / ``{name:.3f}`` in a template."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


def fill(template: str, env: Mapping[str, Number]) -> str:
    """``template`` with the variant's values in place of its placeholders."""
    return template.format(**env)


def _texts(text: str | Text) -> tuple[str, str]:
    return (text, text) if isinstance(text, str) else (text.en, text.zh)


@dataclass(frozen=True)
class ShownChoice:
    letter: str
    en: str
    zh: str
    original: int      # index in the bank, whatever the order shown


@dataclass(frozen=True)
class ShownQuestion:
    id: str
    number: int
    kind: str
    points: float
    en: str
    zh: str
    choices: list[ShownChoice] = field(default_factory=list)


def show(question: Question, variant: Variant, number: int) -> ShownQuestion:
    """``question`` as ``variant``'s student sees it."""
    env = variant.env(question.id)
    choices = []
    for position, original in enumerate(variant.orders.get(question.id, [])):
        en, zh = _texts(question.choices[original].text)
        choices.append(ShownChoice(LETTERS[position], fill(en, env), fill(zh, env), original))
    return ShownQuestion(question.id, number, question.kind, question.points,
                         fill(question.text.en, env), fill(question.text.zh, env), choices)


def shown_questions(course: Course, exam: Exam, variant: Variant) -> list[ShownQuestion]:
    return [show(course.question(qid), variant, i + 1) for i, qid in enumerate(exam.questions)]


@dataclass(frozen=True)
class AnswerKey:
    """What counts as right for one student's question."""

    question_id: str
    kind: str
    points: float
    letters: tuple[str, ...] = ()                  # choice: the correct letters as shown
    value: Number | tuple[Number, ...] | None = None  # numeric
    tolerance: Tolerance = Tolerance()
    accept: tuple[str, ...] = ()                   # short

    def display(self) -> str:
        """The expected answer, as the instructor's key and feedback show it."""
        if self.kind == "choice":
            return ", ".join(self.letters)
        if self.kind == "numeric":
            return str(list(self.value)) if isinstance(self.value, tuple) else f"{self.value:g}"
        return " | ".join(self.accept)

    def model_answer(self) -> object:
        """What a student who is right would write in answers.yaml."""
        if self.kind == "choice":
            return ", ".join(self.letters)
        if self.kind == "numeric":
            return list(self.value) if isinstance(self.value, tuple) else self.value
        return self.accept[0]


def compute_request(question: Question, variant: Variant) -> tuple[str, tuple[tuple[str, Number], ...]]:
    """(computation name, its arguments) for a question answered by the reference."""
    env = variant.env(question.id)
    args = {name: evaluate(value, env) for name, value in question.compute.args.items()}
    return question.compute.name, tuple(sorted(args.items()))


def answer_keys(course: Course, exam: Exam, variants: list[Variant], root: Path,
                computed: Mapping | None = None) -> dict[str, dict[str, AnswerKey]]:
    """Every student's answer key. Numeric answers with ``compute`` come from
    one subprocess that runs the references for all variants at once."""
    from grader.exams.reference_calc import compute_many

    requests = {compute_request(course.question(qid), v) for v in variants for qid in exam.questions
                if course.question(qid).compute is not None}
    results = dict(computed or {})
    missing = sorted(r for r in requests if r not in results)
    if missing:
        results.update(zip(missing, compute_many(course, missing, root)))
    keys: dict[str, dict[str, AnswerKey]] = {}
    for variant in variants:
        keys[variant.student] = {}
        for qid in exam.questions:
            question = course.question(qid)
            keys[variant.student][qid] = _key(question, variant, results)
    return keys


def _key(question: Question, variant: Variant, results: Mapping) -> AnswerKey:
    env = variant.env(question.id)
    if question.kind == "choice":
        order = variant.orders[question.id]
        letters = tuple(LETTERS[pos] for pos, original in enumerate(order) if question.choices[original].correct)
        return AnswerKey(question.id, "choice", question.points, letters=letters)
    if question.kind == "short":
        return AnswerKey(question.id, "short", question.points, accept=tuple(fill(a, env) for a in question.accept))
    if question.compute is not None:
        value = results[compute_request(question, variant)]
    elif isinstance(question.answer, list):
        value = [evaluate(v, env) for v in question.answer]
    else:
        value = evaluate(question.answer, env)
    value = tuple(value) if isinstance(value, list) else value
    return AnswerKey(question.id, "numeric", question.points, value=value, tolerance=question.tolerance)
