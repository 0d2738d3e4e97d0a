"""Exams: variants, course.yaml and question-bank validation, reading and
grading answers, answer keys computed by the references, the late policy."""
import shutil
from datetime import timedelta

import pytest
import yaml

from grader.course import REPO_ROOT, CourseError, load_course
from grader.course.exam_schema import SizeSpec
from grader.course.late_policy import LatePolicy
from grader.exams.answers import grade_answers, normalize_short, parse_letters, parse_numbers, read_answers
from grader.exams.questions import answer_keys, shown_questions
from grader.exams.timing import Stamp, assess, late_factor
from grader.exams.variants import ExamSecretError, load_secret, make_variant

SECRET = b"test-secret-not-for-real-exams-0123"
STUDENTS = [f"s{i:03d}" for i in range(30)]


@pytest.fixture(scope="module")
def variants(course, midterm):
    return {s: make_variant(course, midterm, s, SECRET) for s in STUDENTS}


@pytest.fixture(scope="module")
def keys(course, midterm, variants):
    """Every student's answer key: one subprocess runs the references."""
    return answer_keys(course, midterm, list(variants.values()), REPO_ROOT)


def solved(keys_of_student):
    return {qid: key.model_answer() for qid, key in keys_of_student.items()}


def score(course, exam, variant, keys_of_student, answers):
    verdicts = grade_answers(shown_questions(course, exam, variant), keys_of_student, answers)
    return sum(v.points for v in verdicts), sum(v.max_points for v in verdicts), verdicts


# ---------------------------------------------------------------- variants

def test_the_sample_exam_and_the_bank_are_valid(course, midterm):
    assert len(course.questions) >= 20
    assert [e.id for e in midterm.exercises] == ["03", "06"] and len(midterm.questions) >= 10
    kinds = {course.question(q).kind for q in midterm.questions}
    assert kinds == {"choice", "numeric", "short"}
    for question in course.questions.values():
        assert question.text.en and question.text.zh
    # With the file checks too (the references the answers run exist).
    from grader.exams.validate import exam_problems

    assert exam_problems(course, REPO_ROOT, check_files=True) == []


def test_two_students_get_different_variants(variants):
    a, b = variants["s001"], variants["s002"]
    assert a.sizes != b.sizes and a.seed != b.seed and a.public_seed != b.public_seed
    assert len({tuple(v.sizes.items()) for v in variants.values()}) >= 15   # sizes spread over the class
    assert len({tuple(v.orders["sqrt-dk-why"]) for v in variants.values()}) > 1  # so do choice orders


def test_a_variant_is_reproducible_and_depends_on_the_secret(course, midterm, variants):
    again = make_variant(course, midterm, "s001", SECRET)
    assert again == variants["s001"]
    other = make_variant(course, midterm, "s001", SECRET + b"!")
    assert other.seed != again.seed


def test_sizes_respect_the_declared_ranges(variants):
    for v in variants.values():
        s = v.sizes
        assert s["heads"] in (2, 3, 4, 6) and s["d_model"] == s["heads"] * s["head_dim"]
        assert 4 <= s["seq_len"] <= 9 and s["seq_len"] <= s["context_length"] <= s["seq_len"] + 4
        assert 0 <= v.params["causal-weight"]["query"] < s["seq_len"]


def test_the_public_part_of_a_variant_holds_no_hidden_seed(variants):
    public = variants["s001"].public()
    assert set(public) == {"exam", "student", "sizes", "seed"} and public["seed"] == variants["s001"].public_seed


def test_the_secret_comes_from_the_environment_or_the_file(course, tmp_path, monkeypatch):
    monkeypatch.delenv("GRADER_EXAM_SECRET", raising=False)
    with pytest.raises(ExamSecretError, match="GRADER_EXAM_SECRET"):
        load_secret(course, tmp_path)
    (tmp_path / ".exam-secret").write_text("short\n")
    with pytest.raises(ExamSecretError, match="shorter"):
        load_secret(course, tmp_path)
    (tmp_path / ".exam-secret").write_text("0123456789abcdef0123\n")
    assert load_secret(course, tmp_path) == b"0123456789abcdef0123"
    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    assert load_secret(course, tmp_path) == SECRET


def test_the_secret_file_is_ignored_by_git():
    assert ".exam-secret" in (REPO_ROOT / ".gitignore").read_text().split()


# ---------------------------------------------------------------- answers of a variant

def test_each_reference_solved_exam_scores_full_marks(course, midterm, variants, keys):
    for student, variant in variants.items():
        points, max_points, verdicts = score(course, midterm, variant, keys[student], solved(keys[student]))
        assert points == max_points, [v for v in verdicts if not v.correct]


def test_another_students_answers_score_low(course, midterm, variants, keys):
    fractions = []
    for mine, theirs in zip(STUDENTS, STUDENTS[1:] + STUDENTS[:1]):
        points, max_points, _ = score(course, midterm, variants[mine], keys[mine], solved(keys[theirs]))
        fractions.append(points / max_points)
    assert max(fractions) < 0.75 and sum(fractions) / len(fractions) < 0.5, fractions


def test_numeric_answers_come_from_the_reference(course, midterm, variants, keys):
    for student, v in variants.items():
        s, k = v.sizes, keys[student]
        d, h = s["d_model"], s["heads"]
        assert k["mha-parameters"].value == 4 * d * d + d
        assert k["split-heads-shape"].value == (s["batch"], h, s["seq_len"], d // h)
        assert k["causal-blocked-count"].value == s["seq_len"] * (s["seq_len"] - 1) // 2
        query, key = v.params["causal-weight"]["query"], v.params["causal-weight"]["key"]
        assert k["causal-weight"].value == pytest.approx(0.0 if key > query else 1 / (query + 1), abs=1e-6)


def test_the_shown_numbers_are_the_variants(course, midterm, variants):
    v = variants["s003"]
    shown = {q.id: q for q in shown_questions(course, midterm, v)}
    d, h, ctx = v.sizes["d_model"], v.sizes["heads"], v.sizes["context_length"]
    assert f"MultiHeadAttention({d}, {d}, {ctx}, 0.0, num_heads={h})" in shown["mha-parameters"].en
    assert f"MultiHeadAttention({d}, {d}, {ctx}, 0.0, num_heads={h})" in shown["mha-parameters"].zh
    assert [c.original for c in shown["sqrt-dk-why"].choices] == v.orders["sqrt-dk-why"]


@pytest.mark.parametrize("raw,letters", [("b", ["b"]), (" (B) ", ["b"]), ("b, d", ["b", "d"]), (["D", "b"], ["b", "d"]),
                                         ("Ｂ", ["b"]), ("bd", None), ("2", None)])
def test_letters_are_read_forgivingly(raw, letters):
    assert parse_letters(raw) == letters


@pytest.mark.parametrize("raw,value", [(3, 3), ("0.25", 0.25), ("1/4", 0.25), ("1e-3", 0.001), ("sqrt(4)", 2.0),
                                       ("[2, 3, 4]", [2, 3, 4]), ("(2,3)", [2, 3]), ([2, "3"], [2, 3]), ("2, 3", [2, 3]),
                                       ("two", None), (True, None), ("__import__('os')", None)])
def test_numbers_are_read_forgivingly(raw, value):
    assert parse_numbers(raw) == value


def test_short_answers_ignore_case_spacing_and_width():
    assert normalize_short(" The  Encoder ") == normalize_short("the encoder") == "encoder"
    assert normalize_short("ＶＡＬＵＥＳ。") == "value"


def test_answers_file_that_is_not_yaml_is_read_line_by_line(tmp_path):
    path = tmp_path / "answers.yaml"
    path.write_text("sqrt-dk-why: b\nmask-before-softmax: a: because\n\tqkv-output-values: values  # mine\n")
    answers, problems = read_answers(path)
    assert answers == {"sqrt-dk-why": "b", "mask-before-softmax": "a: because", "qkv-output-values": "values"}
    assert problems and "line by line" in problems[0]
    assert read_answers(tmp_path / "missing.yaml") == ({}, ["missing.yaml is missing"])


def test_verdicts_say_why(course, midterm, variants, keys):
    k = keys["s001"]
    answers = {"sqrt-dk-why": "z", "mha-parameters": "lots", "split-heads-shape": list(k["split-heads-shape"].value)[:3]}
    _, _, verdicts = score(course, midterm, variants["s001"], k, answers)
    reasons = {v.question_id: v.reason for v in verdicts}
    assert reasons["sqrt-dk-why"].startswith("not a choice")
    assert reasons["mha-parameters"] == "not a number"
    assert reasons["split-heads-shape"] == "wrong values"
    assert reasons["table-path-rnn"] == "not answered"


def test_numeric_tolerance(course, midterm, variants, keys):
    k = keys["s002"]
    pe = k["pe-value"].value
    for given, right in [(round(pe, 4), True), (pe + 2e-4, False)]:
        _, _, verdicts = score(course, midterm, variants["s002"], k, {"pe-value": given})
        assert next(v for v in verdicts if v.question_id == "pe-value").correct is right


# ---------------------------------------------------------------- late policy

POLICY = LatePolicy(action="penalty", grace_min=5, penalty_per_min=0.01, max_late_min=60)


@pytest.mark.parametrize("late,factor", [(0, 1.0), (4.9, 1.0), (15, 0.9), (60, 0.45), (61, 0.0)])
def test_late_penalty(late, factor):
    assert late_factor(POLICY, late)[0] == pytest.approx(factor)


def test_accept_and_zero_policies():
    assert late_factor(LatePolicy(action="accept"), 30)[0] == 1.0
    assert late_factor(LatePolicy(action="zero", grace_min=2), 1)[0] == 1.0
    assert late_factor(LatePolicy(action="zero", grace_min=2), 3)[0] == 0.0


def test_deadline_counts_extra_time_and_individual_starts(midterm):
    start = midterm.starts_at
    due = start + timedelta(minutes=midterm.time_limit_min)
    on_time = assess(midterm, Stamp(due + timedelta(minutes=20), None, "metadata"), extra_min=30)
    assert not on_time.flagged and on_time.factor == 1.0
    late = assess(midterm, Stamp(due + timedelta(minutes=25), None, "manifest"))
    assert late.flagged and late.late_min == 25 and late.factor == pytest.approx(0.8)
    started_late = assess(midterm, Stamp(due + timedelta(minutes=25), start + timedelta(minutes=30), "manifest"))
    assert not started_late.flagged
    unknown = assess(midterm, Stamp(None, None, "none"))
    assert unknown.factor == 1.0 and not unknown.known and "lateness unknown" in unknown.note


# ---------------------------------------------------------------- validation

@pytest.fixture
def course_files(tmp_path):
    """A writable copy of course.yaml and the question bank."""
    shutil.copytree(REPO_ROOT / "exams", tmp_path / "exams")
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    bank = yaml.safe_load((tmp_path / "exams" / "questions.yaml").read_text(encoding="utf-8"))
    return tmp_path, data, bank


def _problems(tmp_path, data, bank=None):
    (tmp_path / "course.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    if bank is not None:
        (tmp_path / "exams" / "questions.yaml").write_text(yaml.safe_dump(bank, allow_unicode=True), encoding="utf-8")
    with pytest.raises(CourseError) as info:
        load_course(tmp_path / "course.yaml", check_files=False)
    return info.value.problems


def test_exam_with_an_unknown_exercise_or_question_is_named(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["exercises"][1]["id"] = "42"
    data["exams"][0]["questions"].append("no-such-question")
    problems = _problems(tmp_path, data)
    assert ("exams[0].exercises[1].id", "unknown exercise '42'") in problems
    assert any(w.startswith("exams[0].questions[") and "no-such-question" in m for w, m in problems)


def test_exam_schema_errors_have_field_paths(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["late_policy"]["action"] = "forgive"
    data["exams"][0]["variant"]["batch"] = {"min": 2}
    wheres = [w for w, _ in _problems(tmp_path, data)]
    assert "exams[0].late_policy.action" in wheres and "exams[0].variant.batch" in wheres


def test_exam_start_needs_a_timezone(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["starts_at"] = "2026-04-20T09:00:00"
    assert [w for w, _ in _problems(tmp_path, data)] == ["exams[0].starts_at"]


def test_variant_expression_with_an_unknown_name_is_named(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["variant"]["context_length"]["max"] = "seq_length + 4"
    (where, message), = _problems(tmp_path, data)
    assert where == "exams[0].variant.context_length.max" and "seq_length" in message


def test_sizes_that_depend_on_each_other_are_named(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["variant"]["seq_len"] = {"min": 4, "max": "context_length"}
    (where, message), = _problems(tmp_path, data)
    assert where == "exams[0].variant" and "depend on each other" in message


def test_the_order_of_the_sizes_does_not_matter(course, midterm, variants):
    """YAML tools may sort keys: sizes are drawn after those they use, by name."""
    shuffled = midterm.model_copy(update={"variant": dict(sorted(midterm.variant.items()))})
    assert make_variant(course, shuffled, "s001", SECRET).sizes == variants["s001"].sizes


def test_empty_range_is_caught_by_sample_draws(course_files):
    tmp_path, data, _ = course_files
    data["exams"][0]["variant"]["context_length"] = {"min": "seq_len + 1", "max": "seq_len"}
    (where, message), = _problems(tmp_path, data)
    assert where == "exams[0]" and "min" in message and "max" in message


def test_exam_checks_need_their_sizes(course_files):
    tmp_path, data, _ = course_files
    del data["exams"][0]["variant"]["context_length"]
    problems = _problems(tmp_path, data)
    assert any(w == "exams[0].exercises[0]" and "context_length" in m for w, m in problems)


def test_bank_errors_are_named_with_the_bank_file(course_files):
    tmp_path, data, bank = course_files
    bank["questions"][0]["kind"] = "essay"
    bank["questions"][1]["choices"][0]["correct"] = False
    problems = _problems(tmp_path, data, bank)
    assert any(w == "exams/questions.yaml: questions[0].kind" for w, _ in problems)
    assert any(w == "exams/questions.yaml: questions[1]" and "correct" in m for w, m in problems)


def test_bank_unknown_placeholder_and_computation_are_named(course_files):
    tmp_path, data, bank = course_files
    by_id = {q["id"]: q for q in bank["questions"]}
    by_id["mha-parameters"]["text"]["zh"] += " {dmodel}"
    problems = _problems(tmp_path, data, bank)
    assert any("mha-parameters" in w and "text.zh" in w and "dmodel" in m for w, m in problems)
    by_id["mha-parameters"]["text"]["zh"] = by_id["mha-parameters"]["text"]["zh"].replace(" {dmodel}", "")
    by_id["mha-parameters"]["compute"]["name"] = "mha_params"
    (where, message), = _problems(tmp_path, data, bank)
    assert where.endswith("compute.name") and "mha_params" in message


def test_every_bank_question_renders_with_the_standard_sizes(course):
    """Questions no exam uses yet are checked too: an exam with every question."""
    from grader.exams.validate import exam_problems

    standard = dict(course.exam("midterm").variant)
    standard["vocab"] = SizeSpec(min=100, max=999)
    everything = course.exam("midterm").model_copy(update={"questions": list(course.questions),
                                                                "variant": standard, "id": "everything"})
    course = course.model_copy(update={"exams": [everything]})
    course._questions = course.questions
    assert exam_problems(course, REPO_ROOT) == []


def test_every_computed_answer_of_the_bank_runs_on_the_references(course):
    standard = {**course.exam("midterm").variant, "vocab": SizeSpec(min=100, max=999)}
    everything = course.exam("midterm").model_copy(update={"questions": list(course.questions),
                                                                "variant": standard, "id": "everything"})
    drawn = [make_variant(course, everything, s, SECRET) for s in ("a1", "b2")]
    keys = answer_keys(course, everything, drawn, REPO_ROOT)
    for v in drawn:
        k, s = keys[v.student], v.sizes
        d = s["d_model"]
        assert k["embedding-parameters"].value == v.env("embedding-parameters")["vocab"] * d
        assert k["encoder-layer-parameters"].value == (4 * d * d + 4 * d) + (2 * 4 * d * d + 5 * d) + 4 * d
        assert k["dropout-train-scale"].value == pytest.approx(1 / (1 - v.params["dropout-train-scale"]["p"]), rel=1e-5)
        assert k["attention-output-shape"].value == (s["batch"], s["seq_len"], d)
        assert k["wrapper-parameters"].value == s["heads"] * 3 * d * s["head_dim"]


def _choice_texts(question) -> tuple[set[str], set[str]]:
    """(correct, wrong) choice texts of a choice question, spacing and case aside."""
    def canon(choice) -> str:
        text = choice.text if isinstance(choice.text, str) else choice.text.en
        return "".join(text.split()).casefold()
    return ({canon(c) for c in question.choices if c.correct}, {canon(c) for c in question.choices if not c.correct})


def answer_each_other(first, second) -> bool:
    """Each question offers the other's key among its wrong choices: a
    student who reads both can answer both (mirror choice lists)."""
    if first.kind != "choice" or second.kind != "choice":
        return False
    right_1, wrong_1 = _choice_texts(first)
    right_2, wrong_2 = _choice_texts(second)
    return bool(right_1 & wrong_2) and bool(right_2 & wrong_1)


def test_no_exam_holds_two_questions_that_answer_each_other(course):
    pairs = [(exam.id, a, b) for exam in course.exams for i, a in enumerate(exam.questions)
             for b in exam.questions[i + 1:] if answer_each_other(course.question(a), course.question(b))]
    assert pairs == []
    # The rule can fail: the two norm questions mirror each other, and so may never share an exam.
    assert answer_each_other(course.question("post-norm"), course.question("prenorm-block"))
