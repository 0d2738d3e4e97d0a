"""Exercise 17's exam questions: the computed answers are the notes'
formula, run on the reference (grader/exams/reference_calc.py)."""
from __future__ import annotations

from grader.course import REPO_ROOT, load_course
from grader.exams.reference_calc import compute_many


def _args(**kwargs) -> tuple:
    return tuple(sorted(kwargs.items()))


def test_gqa_answers_follow_the_formula():
    course = load_course(REPO_ROOT / "course.yaml")
    configs = [(80, 64, 8, 128, 2), (32, 32, 32, 128, 2), (16, 16, 1, 64, 4)]
    requests = [("gqa_cache_bytes_per_token", _args(num_layers=layers, num_heads=h, num_kv_heads=g, head_dim=hd,
                                                   value_bytes=size)) for layers, h, g, hd, size in configs]
    requests.append(("gqa_parameters", _args(num_heads=8, num_kv_heads=2, head_dim=16)))
    *cache_bytes, parameters = compute_many(course, requests, REPO_ROOT)
    assert cache_bytes == [2 * layers * g * hd * size for layers, _, g, hd, size in configs]
    assert cache_bytes[0] == 327_680          # the README's and the notes' LLaMA-2-70B
    d = 8 * 16
    assert parameters == d * d + 2 * d * (2 * 16) + d * d + d


def test_gqa_questions_are_in_the_bank():
    ids = set(load_course(REPO_ROOT / "course.yaml").questions)
    assert {"gqa-cache-bytes-per-token", "gqa-cache-saving", "gqa-kv-head-of-query", "gqa-parameters",
            "gqa-what-shrinks", "gqa-repeat-order"} <= ids
