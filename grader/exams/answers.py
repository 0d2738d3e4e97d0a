"""Read a student's ``answers.yaml`` and grade it against their answer key.

Students write by hand, so reading is forgiving: letters in any case and with
brackets (``B``, ``(b)``, ``b, d``), numbers as ``0.25``, ``1/4``, ``1e-3``
or ``sqrt(2)/2``, shapes as ``[2, 4, 7, 8]`` or ``(2, 4, 7, 8)``, short answers
with any case, spacing and full-width characters. Where the key is ONE
number, also as written in prose: thousands separators (``8,000``,
``8 000``, ``8_000``), a unit the question names after it (``12,288 bytes``,
``768 B``, ``4,160 parameters``, ``字节``, ``个``), a percent where it asks
for a probability (``35.99%``) and a leading ``≈`` or ``~``. A file that is
not valid YAML is read line by line (``id: answer``) rather than rejected whole.
Grading is all or nothing per question; the verdict says why. An answer that
cannot be read at all is not "wrong": its verdict has ``review`` set, and
``grader exam grade`` lists it, with the text written, in ``review.csv``.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass, field

from grader.exams.answers_file import MAX_ANSWERS_BYTES, read_answers  # noqa: F401  (reading, with bounds)
from grader.exams.expr import ExprError, Number, evaluate
from grader.exams.normalise import allows_percent, normalise_short, single_number_text, units_named
from grader.exams.questions import AnswerKey, ShownQuestion


@dataclass
class QuestionVerdict:
    question_id: str
    kind: str
    points: float
    max_points: float
    correct: bool
    answered: bool
    given: str           # what the student wrote (shortened)
    expected: str        # the key, as shown to the instructor
    reason: str = ""
    picked: list[int] = field(default_factory=list)   # choice: the bank's indices of the letters given
    review: bool = False  # unreadable: for the instructor to read (review.csv), never silently "wrong"

    def to_dict(self) -> dict:
        return asdict(self)


def _text(value: object) -> str:
    return unicodedata.normalize("NFKC", str(value)).strip()


def normalize_short(value: object) -> str:
    """Case, spaces, full-width forms, dashes for minus, quotes, surrounding
    punctuation, articles and plurals do not matter (grader/exams/normalise.py)."""
    return normalise_short(value)


def parse_letters(value: object) -> list[str] | None:
    """``"b"``, ``"(B)"``, ``"b, d"``, ``["b", "d"]`` -> sorted letters; None if unreadable."""
    items = value if isinstance(value, list) else re.split(r"[,;/\s]+", _text(value))
    letters = []
    for item in items:
        token = _text(item).strip("()[].）（").casefold()
        if not token:
            continue
        if len(token) != 1 or not token.isalpha() or not token.isascii():
            return None
        letters.append(token)
    return sorted(set(letters)) or None


def _number(value: object) -> Number | None:
    if isinstance(value, bool):
        return None
    text = value if isinstance(value, (int, float)) else \
        _text(value).replace("×", "*").replace("^", "**").replace("√", "sqrt")
    if text == "":
        return None
    # evaluate bounds every value (size, finiteness, real) and turns every
    # arithmetic error into ExprError; the rest is belt and braces.
    try:
        result = evaluate(text, {"pi": math.pi, "e": math.e})
        return result if math.isfinite(result) else None
    except (ExprError, ArithmeticError, TypeError, ValueError, RecursionError, MemoryError):
        return None


def parse_numbers(value: object) -> Number | list[Number] | None:
    """A number, or a list of numbers (a shape); None if unreadable."""
    if isinstance(value, (list, tuple)):
        items = [_number(v) for v in value]
        return None if not items or any(v is None for v in items) else items
    text = _text(value)
    if text[:1] in "([" and text[-1:] in ")]":
        parts = [p for p in re.split(r"[,\s]+", text[1:-1]) if p]
        return parse_numbers(parts) if parts else None
    if "," in text:
        return parse_numbers(text.split(","))
    return _number(text)


def parse_single_number(value: object, *, units: tuple[str, ...] = (), percent: bool = False) -> Number | None:
    """ONE number, for a key that is one number: as :func:`parse_numbers`
    reads it, and also with thousands separators, a trailing unit among
    ``units``, a percent (when ``percent``) or a leading ``≈``/``~``
    (grader/exams/normalise.py). A list, or "8, 000", is None: not read."""
    if isinstance(value, bool) or isinstance(value, (list, tuple)):
        return None
    if isinstance(value, (int, float)):
        return _number(value)
    read = single_number_text(_text(value), units=units, percent=percent)
    if read is None:
        return None
    number = _number(read[0])
    return None if number is None else number * read[1]


def _close(given: Number, expected: Number, key: AnswerKey) -> bool:
    allowed = max(key.tolerance.abs, key.tolerance.rel * abs(expected), 1e-9 * max(1.0, abs(expected)))
    return abs(given - expected) <= allowed


def grade_one(shown: ShownQuestion, key: AnswerKey, raw: object) -> QuestionVerdict:
    """One question: full points when right, zero otherwise."""
    given = "" if raw is None else _text(raw if not isinstance(raw, list) else ", ".join(map(str, raw)))[:80]
    verdict = QuestionVerdict(key.question_id, key.kind, 0.0, key.points, False, bool(given), given, key.display())
    if not given:
        verdict.reason = "not answered"
        return verdict
    if key.kind == "choice":
        letters = parse_letters(raw)
        by_letter = {c.letter: c.original for c in shown.choices}
        if letters is None or any(letter not in by_letter for letter in letters):
            verdict.reason = f"not a choice among {', '.join(by_letter)}"
            verdict.review = True
            return verdict
        verdict.picked = sorted(by_letter[letter] for letter in letters)
        verdict.correct = tuple(letters) == tuple(sorted(key.letters))
        verdict.reason = "" if verdict.correct else "wrong choice"
    elif key.kind == "numeric":
        expected = key.value
        if isinstance(expected, tuple):
            number = parse_numbers(raw)
        else:
            asked = f"{shown.en}\n{shown.zh}"
            number = parse_single_number(raw, units=units_named(asked), percent=allows_percent(asked))
        if number is None:
            verdict.reason = "not a number" if not isinstance(expected, tuple) else "not a list of numbers"
            verdict.review = True
        elif isinstance(expected, tuple):
            verdict.correct = (isinstance(number, list) and len(number) == len(expected)
                               and all(_close(g, e, key) for g, e in zip(number, expected)))
            verdict.reason = "" if verdict.correct else "wrong values"
        else:
            verdict.correct = _close(number, expected, key)
            verdict.reason = "" if verdict.correct else "wrong value"
    else:
        verdict.correct = normalize_short(raw) in {normalize_short(a) for a in key.accept}
        verdict.reason = "" if verdict.correct else "not an accepted answer"
    verdict.points = key.points if verdict.correct else 0.0
    return verdict


def grade_answers(shown: list[ShownQuestion], keys: dict[str, AnswerKey],
                  answers: dict[str, object]) -> list[QuestionVerdict]:
    """Every question of the student's exam, in the order shown."""
    return [grade_one(q, keys[q.id], answers.get(q.id)) for q in shown]
