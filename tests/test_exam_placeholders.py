"""`grader validate` rejects a placeholder or an expression that no exam's
variant defines, in every question of the bank: those an exam asks (checked
against that exam's variant) and those no exam asks yet (checked against
the names some variant defines), in texts, choices and accepted answers."""
import shutil

import pytest
import yaml

from grader.course import REPO_ROOT, CourseError, load_course


@pytest.fixture
def course_files(tmp_path):
    shutil.copytree(REPO_ROOT / "exams", tmp_path / "exams")
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    bank = yaml.safe_load((tmp_path / "exams" / "questions.yaml").read_text(encoding="utf-8"))
    return tmp_path, data, bank


def _problems(tmp_path, data, bank) -> list[tuple[str, str]]:
    (tmp_path / "course.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    (tmp_path / "exams" / "questions.yaml").write_text(yaml.safe_dump(bank, allow_unicode=True), encoding="utf-8")
    try:
        load_course(tmp_path / "course.yaml", check_files=False)
    except CourseError as error:
        return error.problems
    return []


def _question(bank, question_id):
    return next(q for q in bank["questions"] if q["id"] == question_id)


def test_the_real_bank_passes(course_files):
    assert _problems(*course_files) == []


@pytest.mark.parametrize("question_id,part", [
    ("embedding-parameters", "text.en"),     # in no exam
    ("encoder-layer-parameters", "text.zh"),  # in no exam
    ("mha-parameters", "text.en"),           # asked by the midterm
])
def test_a_placeholder_no_variant_defines_is_named(course_files, question_id, part):
    tmp_path, data, bank = course_files
    field, language = part.split(".")
    _question(bank, question_id)[field][language] += " ({vocab_size} tokens)"
    problems = _problems(tmp_path, data, bank)
    assert any(question_id in where and part in where and "vocab_size" in message for where, message in problems), problems


def test_a_placeholder_in_a_choice_or_an_accepted_answer_of_an_unasked_question_is_named(course_files):
    tmp_path, data, bank = course_files
    _question(bank, "qkv-compared-with-query")["choices"][1]["text"]["zh"] += " {n_keys}"
    _question(bank, "mask-fill-value")["accept"].append("{minus}inf")
    problems = _problems(tmp_path, data, bank)
    assert any("qkv-compared-with-query" in w and "choices[1].zh" in w and "n_keys" in m for w, m in problems), problems
    assert any("mask-fill-value" in w and "accept[" in w and "minus" in m for w, m in problems), problems


def test_a_question_that_defines_its_own_param_is_accepted(course_files):
    tmp_path, data, bank = course_files
    question = _question(bank, "embedding-parameters")
    question["params"]["tokens"] = {"min": 10, "max": 20}
    question["text"]["en"] += " ({tokens} tokens)"
    assert _problems(tmp_path, data, bank) == []


def test_a_computed_answer_with_an_unknown_name_is_named(course_files):
    tmp_path, data, bank = course_files
    _question(bank, "encoder-layer-parameters")["compute"]["args"]["d_model"] = "width"
    problems = _problems(tmp_path, data, bank)
    assert any("encoder-layer-parameters" in w and "compute.args.d_model" in w and "width" in m for w, m in problems)


def test_a_placeholder_in_a_hint_is_named(tmp_path):
    """Hints are shown as written: "{vocab}" in one would reach students."""
    for name in ("exercises", "solutions"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "grader" / "pitfalls", tmp_path / "grader" / "pitfalls")
    shutil.copytree(REPO_ROOT / "exams", tmp_path / "exams")
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    data["pitfalls"][2]["hint"]["zh"] += " {d_model:.0f}"
    (tmp_path / "course.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(CourseError) as info:
        load_course(tmp_path / "course.yaml")
    assert any(where == "pitfalls[2].hint.zh" and "{d_model}" in message for where, message in info.value.problems)
