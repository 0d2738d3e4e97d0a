"""Exam answers read numbers as students write them (grader/exams/answers.py,
grader/exams/normalise.py): for a key that is ONE number, thousands
separators, a unit the question names, a percent for a probability and a
leading ≈ or ~; an answer still unreadable goes to the instructor's review
list (review.csv) with its text, never silently "wrong value"."""
from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest

from grader.exams.answers import grade_one, parse_single_number
from grader.exams.questions import AnswerKey, show
from grader.exams.report import write_review_csv
from grader.exams.variants import make_variant

SECRET = b"test-secret-for-number-forms-0123"


@pytest.fixture(scope="module")
def variant(course):
    return make_variant(course, course.exam("quiz-gpt"), "forms01", SECRET)


def shown_and_key(course, variant, question_id: str, value) -> tuple:
    return show(course.question(question_id), variant, 1), AnswerKey(question_id, "numeric", 3.0, value=value)


@pytest.mark.parametrize("written", [
    "12288", "12,288", "12 288", "12\u2009288", "12\u202f288", "12\u00a0288", "12_288", "12，288",
    "12,288 bytes", "12288bytes", "12,288 B", "12288 B", "12 288 字节", "12,288字节", "≈12,288", "~ 12288 bytes",
    "2*4*768*2",
])
def test_a_byte_count_is_read_as_written(course, variant, written):
    shown, key = shown_and_key(course, variant, "kv-cache-bytes-per-token", 12288)
    verdict = grade_one(shown, key, written)
    assert verdict.correct and not verdict.review, (written, verdict.reason)


@pytest.mark.parametrize("written", ["128,000", "128 000 parameters", "128,000 个", "128000 个参数", "128_000"])
def test_a_parameter_count_is_read_as_written(course, variant, written):
    shown, key = shown_and_key(course, variant, "tied-weights-saved", 128000)
    assert grade_one(shown, key, written).correct, written


@pytest.mark.parametrize("written", ["0.3599", "35.99%", "35.99 %", "≈0.3599", "~0.36", "≈ 35.99%", "３５.９９％"])
def test_a_probability_may_be_a_percent(course, variant, written):
    shown, key = shown_and_key(course, variant, "temperature-probability", 0.35993)
    key = AnswerKey(key.question_id, "numeric", 3.0, value=0.35993, tolerance=course.question(key.question_id).tolerance)
    assert grade_one(shown, key, written).correct, written


def test_eight_thousand_is_one_number_not_a_list(course, variant):
    shown, key = shown_and_key(course, variant, "tied-weights-saved", 8000)
    assert grade_one(shown, key, "8,000").correct
    assert parse_single_number("8,000") == 8000


@pytest.mark.parametrize("written,units,percent", [
    ("8, 000", (), False),          # a list, or a typo: not one number we can be sure of
    ("8,00", (), False),            # not groups of three
    ("2 3", (), False),
    ("[8, 0]", (), False),
    ("12,288 parameters", ("bytes", "b"), False),   # a unit the question does not name
    ("35.99%", (), False),          # a percent where no probability is asked
    ("lots", (), False),
])
def test_what_is_not_one_number_is_not_read(written, units, percent):
    assert parse_single_number(written, units=units, percent=percent) is None


@pytest.mark.parametrize("written", ["8, 000", "12,288 parameters", "[12288]", "about twelve thousand", ["12", "288"]])
def test_an_unreadable_answer_goes_to_the_review_list_with_its_text(course, variant, written, tmp_path):
    shown, key = shown_and_key(course, variant, "kv-cache-bytes-per-token", 12288)
    verdict = grade_one(shown, key, written)
    assert verdict.review and verdict.reason == "not a number" and not verdict.correct
    run = SimpleNamespace(results=[SimpleNamespace(student="s001", questions=[verdict])])
    write_review_csv(run, tmp_path / "review.csv")
    rows = list(csv.DictReader((tmp_path / "review.csv").open(encoding="utf-8")))
    shown_text = ", ".join(written) if isinstance(written, list) else written
    assert [(r["student"], r["question"], r["given"]) for r in rows] == [("s001", "kv-cache-bytes-per-token", shown_text)]


def test_a_wrong_number_is_wrong_not_for_review(course, variant):
    shown, key = shown_and_key(course, variant, "kv-cache-bytes-per-token", 12288)
    verdict = grade_one(shown, key, "6,144 bytes")
    assert verdict.reason == "wrong value" and not verdict.review


def test_shapes_still_read_lists(course):
    """A list key keeps reading "2, 3" as a list (decided by the key, not the text)."""
    from grader.exams.answers import parse_numbers
    assert parse_numbers("2, 3") == [2, 3] and parse_numbers("[2, 4, 7, 8]") == [2, 4, 7, 8]


def test_the_instructions_name_the_forms(course, variant):
    from grader.exams.build import answers_template, questions_markdown
    from grader.exams.questions import shown_questions
    exam = course.exam("quiz-gpt")
    shown = shown_questions(course, exam, variant)
    for text in (questions_markdown(exam, shown), answers_template(exam, variant, shown)):
        for form in ("8,000", "12,288 bytes", "35.99%", "≈"):
            assert form in text, form
