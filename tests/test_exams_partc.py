"""The part C practice quiz (course.yaml ``quiz-gpt``): every student's
variant shows every question with its sizes filled in, and the keys the
reference GPT computes (grader/exams/reference_calc.py) are the closed
forms, recomputed here from the variant alone."""
from __future__ import annotations

import math
import re

import pytest

from grader.course import REPO_ROOT
from grader.exams.answers import grade_one
from grader.exams.questions import answer_keys, show, shown_questions
from grader.exams.variants import make_variant

SECRET = b"test-secret-for-the-part-c-quiz-0123"
STUDENTS = tuple(f"c{i:02d}" for i in range(8))


@pytest.fixture(scope="module")
def quiz(course):
    return course.exam("quiz-gpt")


@pytest.fixture(scope="module")
def drawn(course, quiz):
    return [make_variant(course, quiz, student, SECRET) for student in STUDENTS]


@pytest.fixture(scope="module")
def keys(course, quiz, drawn):
    return answer_keys(course, quiz, drawn, REPO_ROOT)


def test_the_quiz_covers_part_c_and_grades_exercise_12(quiz):
    assert {"prenorm-block", "prenorm-final-norm", "tied-weights-saved", "kv-cache-bytes-per-token",
            "temperature-probability"} <= set(quiz.questions)
    assert [e.id for e in quiz.exercises] == ["12"]


def test_every_question_is_shown_with_its_sizes(course, quiz, drawn):
    for variant in drawn:
        for shown in shown_questions(course, quiz, variant):
            for text in (shown.en, shown.zh):
                assert not re.search(r"\{\w+\}", text), (shown.id, text)


def test_the_keys_are_the_closed_forms(course, drawn, keys):
    sizes_seen = set()
    for variant in drawn:
        s, p, k = variant.env(), variant.params, keys[variant.student]
        d = s["d_model"]
        kv, temp = p["kv-cache-bytes-per-token"], p["temperature-probability"]
        t, gap = temp["temperature"], temp["gap"]
        expected = {
            # one vocab x d_model matrix stored once instead of twice
            "tied-weights-saved": p["tied-weights-saved"]["vocab"] * d,
            # per block, the new token's key and value, d_model numbers each (all heads together)
            "kv-cache-bytes-per-token": 2 * kv["num_layers"] * d * kv["value_bytes"],
            "temperature-probability": math.exp(gap / t) / (math.exp(gap / t) + math.exp(1 / t) + 1),
        }
        sizes_seen.add((d, kv["num_layers"], kv["value_bytes"]))
        for question_id, value in expected.items():
            assert k[question_id].value == pytest.approx(value, abs=1e-9), (question_id, variant.student)
            shown = show(course.question(question_id), variant, 1)
            assert grade_one(shown, k[question_id], value).correct
            assert not grade_one(shown, k[question_id], value * 1.5 + 0.01).correct
    assert len(sizes_seen) > 1, "every student drew the same sizes: the variants do not vary"


def test_a_head_count_answer_for_the_cache_is_wrong(course, drawn, keys):
    """The classic slip: multiplying by the number of heads as well (d_model already holds every head)."""
    for variant in drawn:
        s, kv = variant.env(), variant.params["kv-cache-bytes-per-token"]
        slip = 2 * kv["num_layers"] * s["d_model"] * s["heads"] * kv["value_bytes"]
        shown = show(course.question("kv-cache-bytes-per-token"), variant, 1)
        assert not grade_one(shown, keys[variant.student]["kv-cache-bytes-per-token"], slip).correct
