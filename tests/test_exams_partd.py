"""The part D practice quiz (course.yaml ``quiz-modern``): a question on
each of exercises 15-18, every student's variant shown with its sizes
filled in, and the numeric keys the references compute
(grader/exams/reference_calc.py) equal to closed forms recomputed here
from the variant alone: a right answer scores, a classic slip does not."""
from __future__ import annotations

import math
import re

import pytest

from grader.course import REPO_ROOT
from grader.exams.answers import grade_one
from grader.exams.questions import answer_keys, show, shown_questions
from grader.exams.variants import make_variant

SECRET = b"test-secret-for-the-part-d-quiz-0123"
STUDENTS = tuple(f"d{i:02d}" for i in range(8))


@pytest.fixture(scope="module")
def quiz(course):
    return course.exam("quiz-modern")


@pytest.fixture(scope="module")
def drawn(course, quiz):
    return [make_variant(course, quiz, student, SECRET) for student in STUDENTS]


@pytest.fixture(scope="module")
def keys(course, quiz, drawn):
    return answer_keys(course, quiz, drawn, REPO_ROOT)


def test_the_quiz_asks_about_each_part_d_exercise_and_grades_17(course, quiz):
    concepts = " ".join(c for q in quiz.questions for c in course.question(q).concepts)
    for exercise in ("15", "16", "17", "18"):
        assert f"exercise {exercise}" in concepts
    assert [e.id for e in quiz.exercises] == ["17"]


def test_every_question_is_shown_with_its_sizes(course, quiz, drawn):
    for variant in drawn:
        for shown in shown_questions(course, quiz, variant):
            for text in (shown.en, shown.zh):
                assert not re.search(r"\{\w+\}", text), (shown.id, text)


def _closed_forms(p: dict) -> dict[str, float]:
    fm, fb = p["flash-attention-matrix-bytes"], p["flash-attention-causal-blocks"]
    n_q, block = fb["n_q"], fb["block_size"]
    n_k = n_q + fb["extra_keys"]
    gb, gh = p["gqa-cache-bytes-per-token"], p["gqa-kv-head-of-query"]
    rf, rs = p["sliding-receptive-field"], p["sliding-ring-slot"]
    return {
        "flash-attention-matrix-bytes": fm["n"] * fm["n"] * fm["heads"] * fm["value_bytes"],
        # bottom-right diagonal: query block [start, end) sees keys below end + n_k - n_q
        "flash-attention-causal-blocks": sum(math.ceil(min(n_k, min(n_q, start + block) + n_k - n_q) / block)
                                             for start in range(0, n_q, block)),
        "gqa-cache-bytes-per-token": 2 * gb["num_layers"] * gb["kv_heads"] * gb["hd"] * gb["value_bytes"],
        "gqa-kv-head-of-query": gh["m"] // (gh["q_heads"] // gh["kv_heads"]),
        "sliding-receptive-field": rf["num_layers"] * (rf["window"] - 1) + 1,
        "sliding-ring-slot": rs["position"] % rs["window"],
    }


def test_the_keys_are_the_closed_forms(course, drawn, keys):
    seen = set()
    for variant in drawn:
        k = keys[variant.student]
        for question_id, value in _closed_forms(variant.params).items():
            assert k[question_id].value == pytest.approx(value, abs=1e-9), (question_id, variant.student)
            shown = show(course.question(question_id), variant, 1)
            assert grade_one(shown, k[question_id], value).correct
            assert not grade_one(shown, k[question_id], value * 1.5 + 1).correct
        seen.add(tuple(sorted(variant.params["gqa-cache-bytes-per-token"].items())))
    assert len(seen) > 1, "every student drew the same sizes: the variants do not vary"


def test_the_classic_slips_score_nothing(course, drawn, keys):
    """Caching every query head's keys (no saving), and a receptive field of window x layers."""
    for variant in drawn:
        p, k = variant.params, keys[variant.student]
        gb = p["gqa-cache-bytes-per-token"]
        if gb["q_heads"] != gb["kv_heads"]:
            slip = 2 * gb["num_layers"] * gb["q_heads"] * gb["hd"] * gb["value_bytes"]
            shown = show(course.question("gqa-cache-bytes-per-token"), variant, 1)
            assert not grade_one(shown, k["gqa-cache-bytes-per-token"], slip).correct
        rf = p["sliding-receptive-field"]
        shown = show(course.question("sliding-receptive-field"), variant, 1)
        assert not grade_one(shown, k["sliding-receptive-field"], rf["num_layers"] * rf["window"]).correct
