"""Exams: signs of copying (grader/exams/copying.py). A student who copied
another's whole exam folder, keeping his own variant files, is listed twice:
his answers are right for the other's variant and wrong for his own, and his
code is the other's. Honest students, right or wrong, written apart, are not
listed; and no point changes for the list."""
from __future__ import annotations

import json
import random
import shutil
from math import comb

import pytest
import yaml

from grader.course import REPO_ROOT
from grader.exams.copying import chance_of
from grader.exams.grading import grade_exam
from grader.exams.questions import answer_keys, shown_questions
from grader.exams.report import write_exam_outputs
from grader.exams.variants import make_variant

SECRET = b"test-secret-not-for-real-exams-0123"
STUDENTS = [f"s{i:03d}" for i in range(1, 9)]
COPIER, COPIED = "s008", "s001"
ANSWERS_COPIER, WEAK = "s007", "s003"    # copied the answers (only) of a student who got some wrong
STUB_03 = REPO_ROOT / "exercises" / "03_masking" / "attention.py"
STUB_06 = REPO_ROOT / "exercises" / "06_multihead" / "multihead.py"
# Each student's code: the reference, correct solutions written apart from it, the untouched stubs.
CODE = {"s001": (REPO_ROOT / "solutions" / "03_masking" / "attention.py",
                 REPO_ROOT / "solutions" / "06_multihead" / "multihead.py"),
        "s002": (REPO_ROOT / "tests" / "accuracy" / "03" / "ok_einsum_additive.py",
                 REPO_ROOT / "tests" / "similarity" / "independent_multihead.py"),
        "s003": (REPO_ROOT / "tests" / "accuracy" / "03" / "ok_d2l_masked_softmax.py",
                 REPO_ROOT / "tests" / "accuracy" / "06" / "ok_loop_over_heads.py"),
        "s004": (REPO_ROOT / "tests" / "accuracy" / "03" / "ok_annotated_where.py",
                 REPO_ROOT / "tests" / "accuracy" / "06" / "ok_einsum_heads.py")}


def _wrong(question, key, rng: random.Random) -> object:
    """An honest mistake: another letter, a number off by one, doubled or halved."""
    if key.kind == "choice":
        return next(c.letter for c in question.choices if c.letter not in key.letters)
    if key.kind == "numeric":
        value = key.model_answer()
        return [v + 1 for v in value] if isinstance(value, list) else rng.choice([value + 1, value * 2, value / 2])
    return "query"


@pytest.fixture(scope="module")
def exam_class(course, midterm, tmp_path_factory):
    """Six honest students (all right, or some honest mistakes), one who
    copied the answers of one with some wrong, and one who copied the whole
    folder of the best of them, keeping his own variant.json."""
    variants = {s: make_variant(course, midterm, s, SECRET) for s in STUDENTS}
    keys = answer_keys(course, midterm, list(variants.values()), REPO_ROOT)
    subs = tmp_path_factory.mktemp("subs")
    rng = random.Random(5)
    for i, student in enumerate(STUDENTS[:-1]):
        folder = subs / student
        (folder / "03_masking").mkdir(parents=True)
        (folder / "06_multihead").mkdir()
        code_03, code_06 = CODE.get(student, (STUB_03, STUB_06))
        shutil.copyfile(code_03, folder / "03_masking" / "attention.py")
        shutil.copyfile(code_06, folder / "06_multihead" / "multihead.py")
        answers = {}
        for question in shown_questions(course, midterm, variants[student]):
            key = keys[student][question.id]
            right = student == COPIED or rng.random() < 0.6
            answers[question.id] = key.model_answer() if right else _wrong(question, key, rng)
        (folder / "answers.yaml").write_text(yaml.safe_dump(answers, allow_unicode=True), encoding="utf-8")
        (folder / "variant.json").write_text(json.dumps(variants[student].public()))
    shutil.copyfile(subs / WEAK / "answers.yaml", subs / ANSWERS_COPIER / "answers.yaml")
    shutil.copytree(subs / COPIED, subs / COPIER)
    (subs / COPIER / "variant.json").write_text(json.dumps(variants[COPIER].public()))
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path_factory.mktemp("work"))
    return run, {r.student: r for r in run.results}


def test_answers_on_another_students_key_are_listed(exam_class):
    run, results = exam_class
    listed = {(m.student, m.other): m for m in run.copying.key_matches}
    # Identical answers list the one copied from too, where they share wrong answers.
    assert set(listed) - {(WEAK, ANSWERS_COPIER)} == {(COPIER, COPIED), (ANSWERS_COPIER, WEAK)}, listed
    assert len(listed[COPIER, COPIED].questions) >= 5 and listed[COPIER, COPIED].chance < 1e-4
    assert 0 < results[WEAK].question_points < results[WEAK].question_max   # some of what was copied is wrong
    assert listed[ANSWERS_COPIER, WEAK].same_mistakes
    assert any(p.startswith(f"{COPIER} answered") and f"{COPIED}'s answer key" in p and "not a verdict" in p
               for p in run.problems), run.problems


def test_copied_code_is_listed_and_code_written_apart_is_not(exam_class):
    run, _ = exam_class
    assert sorted((m.exercise, m.first, m.second) for m in run.copying.code_matches) == [
        ("03", COPIED, COPIER), ("06", COPIED, COPIER)]
    assert sum(f"{COPIED} and {COPIER}: exercise" in p for p in run.problems) == 2


def test_the_list_is_no_verdict(exam_class):
    """The copier is graded as before, on his own variant, and his own
    record (what his feedback and the exports show) says nothing of it."""
    _, results = exam_class
    copier = results[COPIER]
    assert copier.status == "graded" and 0 < copier.question_points < copier.question_max / 2
    assert not any(COPIED in p for p in copier.problems)
    assert results[COPIED].question_points == results[COPIED].question_max


def test_the_report_and_results_json_list_them(exam_class, course, tmp_path):
    run, _ = exam_class
    paths = write_exam_outputs(course, run, tmp_path)
    html = paths["report"].read_text(encoding="utf-8")
    section = html.split('id="copying"')[1].split("</details>")[0]
    assert f"<td>{COPIER}</td><td>{COPIED}</td>" in section and f"{COPIED} ~ {COPIER}" in section
    assert "never a verdict" in section and "s002" not in section
    data = json.loads(paths["results"].read_text(encoding="utf-8"))
    assert (COPIER, COPIED) in [(m["student"], m["other"]) for m in data["copying"]["key_matches"]]


def test_the_chance_is_the_tail_of_the_matches():
    assert chance_of([0.5] * 4, 0) == 1.0
    assert chance_of([0.5] * 4, 3) == pytest.approx((comb(4, 3) + 1) / 16)
    assert chance_of([0.1, 0.2, 0.3], 3) == pytest.approx(0.006)
