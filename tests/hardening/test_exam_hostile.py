"""Hostile exam files, class by class: answers.yaml that PyYAML or Python
cannot take, expressions that never end, timestamps that lie or hang, special
files, and work taken from the wrong place. Each must become that student's
own problem, with a bounded fixed text; none may raise out of the grader.
(tests/hardening/test_exam_class_run.py runs them all in one class.)"""
from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT
from grader.exams import expr
from grader.exams.answers import parse_numbers
from grader.exams.answers_file import MAX_ANSWER_CHARS, MAX_ANSWERS_BYTES, read_answers
from grader.exams.grading import grade_exam
from grader.exams.intake import collect_exam, stage_code, visible
from grader.exams.timing import NBGRADER_TIMESTAMP, Stamp, assess, find_stamp

SECRET = b"test-secret-not-for-real-exams-0123"


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the block blocks or loops:
    a named pipe opened for reading, a quadratic regex, an endless power."""
    def expired(*_):
        raise AssertionError(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _answers(tmp_path, text: str | bytes):
    path = tmp_path / "answers.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    with deadline(20):
        return read_answers(path)


# ---------------------------------------------------------------- answers.yaml

@pytest.mark.parametrize("value", ["2026-13-45", "2026-02-30 25:61:00", "1999-99-99T99:99:99Z", "0000-00-00"])
def test_a_bad_date_is_kept_as_text(tmp_path, value):
    answers, problems = _answers(tmp_path, f"causal-weight: {value}\nsqrt-dk-why: b\n")
    assert answers == {"causal-weight": value, "sqrt-dk-why": "b"} and problems == []


def test_a_good_date_is_kept_as_text_too(tmp_path):
    answers, _ = _answers(tmp_path, "q: 2026-04-20\n")
    assert answers == {"q": "2026-04-20"}


@pytest.mark.parametrize("digits", [101, 5000, 100_000])
def test_a_huge_int_is_text_and_not_a_number(tmp_path, digits):
    answers, problems = _answers(tmp_path, "q: 1" + "0" * (digits - 1) + "\nr: 0x" + "f" * digits + "\n")
    assert problems == [] and isinstance(answers["q"], str) and len(answers["q"]) <= MAX_ANSWER_CHARS
    with deadline(5):
        assert parse_numbers(answers["q"]) is None and parse_numbers(answers["r"]) is None


def test_an_int_of_the_usual_size_is_still_an_int(tmp_path):
    answers, _ = _answers(tmp_path, "q: 1_024\nr: -7\n")
    assert answers == {"q": 1024, "r": -7}


@pytest.mark.parametrize("nesting", ["[" * 20_000 + "]" * 20_000, "{a: " * 5_000 + "1" + "}" * 5_000,
                                     "\n" + "\n".join("  " * i + "-" for i in range(1, 300)) + " 1"])
def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path, nesting):
    answers, problems = _answers(tmp_path, f"sqrt-dk-why: b\nq: {nesting}\n")
    assert answers.get("sqrt-dk-why") == "b"                       # the other answer survives
    assert all(len(str(v)) <= MAX_ANSWER_CHARS for v in answers.values())
    assert any("line by line" in p for p in problems)


def test_nesting_of_a_few_levels_is_read(tmp_path):
    answers, problems = _answers(tmp_path, "q: [[1, 2], [3, 4]]\nr: [2, 4, 7, 8]\n")
    assert problems == [] and answers["r"] == [2, 4, 7, 8] and isinstance(answers["q"], str)


def _billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nsqrt-dk-why: b\nq: *a{levels - 1}\n"


@pytest.mark.parametrize("bomb", [_billion_laughs(), "base: &b {x: 1}\nq: {<<: *b, y: 2}\n", "q: &x [*x]\n",
                                  "q: !!binary aGVsbG8=\nr: &r 1\ns: *r\n"])
def test_aliases_are_refused_and_nothing_expands(tmp_path, bomb):
    answers, problems = _answers(tmp_path, bomb)
    assert answers.get("sqrt-dk-why", "b") == "b"
    assert sum(len(str(v)) for v in answers.values()) < 10 * MAX_ANSWER_CHARS
    assert any("aliases" in p for p in problems)


def test_a_file_over_the_cap_is_not_read_and_the_problem_is_fixed_text(tmp_path):
    answers, problems = _answers(tmp_path, "q: " + "[red]x[/red]" * (MAX_ANSWERS_BYTES // 8))
    assert answers == {} and problems == [f"answers.yaml is larger than {MAX_ANSWERS_BYTES >> 10} KiB; not read"]


@pytest.mark.parametrize("text", ["q: [" + ",".join(["1"] * 120_000) + "]\n", "q:\n" + "  - 1\n" * 50_000,
                                  "".join(f"k{i}: v\n" for i in range(40_000))])
def test_a_file_of_many_small_entries_is_not_given_to_pyyaml(tmp_path, text):
    # PyYAML's pure-Python loader took 16 s on the first; the line reader takes milliseconds.
    answers, problems = _answers(tmp_path, text[:MAX_ANSWERS_BYTES])
    assert any("line by line" in p for p in problems) and len(answers) <= 1000


def test_a_250_kb_line_is_read_in_linear_time(tmp_path):
    # The old fallback regex took ~30 min on such a line; a linear one takes milliseconds.
    # The bound below is a hang guard, not a benchmark.
    line = "sqrt-dk-why: b" + " " * 250_000 + "x # comment"
    started = time.perf_counter()
    answers, problems = _answers(tmp_path, line + "\n\tbroken: [\n")
    assert time.perf_counter() - started < 10
    assert answers["sqrt-dk-why"].startswith("b") and len(answers["sqrt-dk-why"]) <= MAX_ANSWER_CHARS
    assert any("line by line" in p for p in problems)


@pytest.mark.parametrize("text", ['q: "\\ud800"\n', 'q: ["\\udfff", b]\n'])
def test_an_unpaired_surrogate_can_be_written_as_utf8(tmp_path, text):
    answers, _ = _answers(tmp_path, text)
    json.dumps(answers, ensure_ascii=False).encode("utf-8")        # results.json, the gradebook


@pytest.mark.parametrize("kind", ["fifo", "link", "folder", "missing"])
def test_answers_yaml_that_is_no_regular_file_never_blocks(tmp_path, kind):
    path = tmp_path / "answers.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        (tmp_path / "elsewhere.yaml").write_text("q: b\n")
        path.symlink_to(tmp_path / "elsewhere.yaml")
    elif kind == "folder":
        path.mkdir()
    with deadline(10):
        answers, problems = read_answers(path)
    assert answers == {} and len(problems) == 1 and problems[0].startswith("answers.yaml ")


# ---------------------------------------------------------------- expressions

@pytest.mark.parametrize("text", [
    "((((9**64)**64)**64)**64)**64", "9**9**9", "2**10**10", "(10**70)*(10**70)*(10**70)*(10**70)",
    "9" * 400, "1" + "0" * 399 + ".5", "-" + "9" * 400,
    "(-1)**0.5", "(-8)**(1/3)", "sqrt(-1)", "log(0)", "1/0", "5 % 0", "exp(1000)", "2.0**5000",
    "round(5, -10**18)", "round(1.5, 10**9)", "min()", "1e999", "-1e999",
    "+".join(["1"] * 1500), "-" * 100_000 + "1", "(" * 300 + "1" + ")" * 300, "sqrt(" * 150 + "4" + ")" * 150,
    "__import__('os')", "(1).__class__", "[1][0]", "lambda: 1",
])
def test_a_hostile_expression_is_no_number_and_returns_at_once(text):
    with deadline(5):
        assert parse_numbers(text) is None
        with pytest.raises(expr.ExprError):
            expr.evaluate(text, {"pi": 3.14159})


@pytest.mark.parametrize("text, value", [("sqrt(2)/2", 2 ** 0.5 / 2), ("1/4", 0.25), ("1e-3", 1e-3),
                                         ("2**64", 2 ** 64), ("+".join(["1"] * 30), 30), ("-(-(3))", 3),
                                         ("abs(-3) * 2", 6), (str(2 ** 200), 2 ** 200)])
def test_what_students_write_by_hand_is_still_read(text, value):
    assert parse_numbers(text) == pytest.approx(value)


def test_every_intermediate_is_bounded_before_it_is_computed():
    with deadline(5):
        assert expr.evaluate("2**255", {}) == 2 ** 255
        for text in ("2**256", "(2**128)**2", "2**200 * 2**200"):
            with pytest.raises(expr.ExprError, match="larger than"):
                expr.evaluate(text, {})


# ---------------------------------------------------------------- timestamps

def _stamped(tmp_path, data: bytes | None = None, **kw) -> tuple[Stamp, str]:
    folder = tmp_path / "s001" / "midterm-s001"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.yaml").write_text("q: b\n")
    if data is not None:
        (folder / NBGRADER_TIMESTAMP).write_bytes(data)
    return folder


def _find(folder, midterm, **kw):
    with deadline(20):
        return find_stamp(folder.parent, "s001", midterm, None, nbgrader_folder=folder, **kw)


def test_a_16_mib_timestamp_is_not_read_nor_repeated(tmp_path, midterm):
    folder = _stamped(tmp_path, b"2026-04-20 02:55:01 UTC" + b"[bold]x[/bold]" * (16 << 20 // 14))
    stamp, problem = _find(folder, midterm)
    assert stamp.submitted_at is None and len(problem) < 200 and "[bold]" not in problem
    assert "larger than" in problem and not assess(midterm, stamp).known


@pytest.mark.parametrize("text", [b"[red]late[/red] \x1b[2J\x1b]52;c;aGk=\x07", b"\xff\xfe not utf-8",
                                  b"99999-01-01 00:00:00 UTC", b"NaN", b"-1", b"1099511627776",
                                  b"9999-12-31T23:59:59-14:00", b"0001-01-01T00:00:00+14:00", b"1970-01-01 00:00:00 UTC"])
def test_a_timestamp_that_is_no_plausible_time_makes_lateness_unknown(tmp_path, midterm, text):
    folder = _stamped(tmp_path, text)
    stamp, problem = _find(folder, midterm)
    lateness = assess(midterm, stamp)
    assert not lateness.known and not lateness.flagged and lateness.factor == 1.0
    assert "lateness unknown" in lateness.note and "lateness unknown" in problem
    assert problem.startswith(f"{NBGRADER_TIMESTAMP} unusable") and "[red]" not in problem and "\x1b" not in problem


def test_a_good_timestamp_is_still_read(tmp_path, midterm):
    stamp, problem = _find(_stamped(tmp_path, b"2026-04-20 02:58:30.123456 UTC"), midterm)
    assert problem == "" and stamp.source == "nbgrader" and assess(midterm, stamp).known


@pytest.mark.parametrize("kind", ["fifo", "folder", "link", "unreadable"])
def test_an_unreadable_timestamp_is_unknown_not_file_times(tmp_path, midterm, monkeypatch, kind):
    folder = _stamped(tmp_path)
    path = folder / NBGRADER_TIMESTAMP
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link":
        path.symlink_to(tmp_path / "nowhere")
    else:                                    # root reads a mode-000 file: fail the read itself
        path.write_text("2026-04-20 02:58:30 UTC")
        import grader.exams.timing as timing

        def refuse(*_):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(timing, "read_bounded", refuse)
    stamp, problem = _find(folder, midterm, trust_file_times=True)   # even then: a record exists
    assert stamp.source == "none" and "lateness unknown" in problem
    assert not assess(midterm, stamp).known


def test_no_record_is_unknown_unless_file_times_are_trusted(tmp_path, midterm):
    folder = tmp_path / "s001"
    folder.mkdir()
    (folder / "answers.yaml").write_text("q: b\n")
    stamp, problem = find_stamp(folder, "s001", midterm)
    assert (stamp.source, problem) == ("none", "") and not assess(midterm, stamp).known
    due = midterm.starts_at + timedelta(minutes=midterm.time_limit_min)
    os.utime(folder / "answers.yaml", (due.timestamp() - 60, due.timestamp() - 60))
    stamp, _ = find_stamp(folder, "s001", midterm, trust_file_times=True)
    assert stamp.source == "mtime" and assess(midterm, stamp).known and not assess(midterm, stamp).flagged


@pytest.mark.parametrize("seconds", [2 ** 40, -(2 ** 40), -86400 * 365 * 40])
def test_file_times_out_of_range_make_lateness_unknown(tmp_path, midterm, seconds):
    folder = tmp_path / "s001"
    folder.mkdir()
    (folder / "answers.yaml").write_text("q: b\n")
    try:
        os.utime(folder / "answers.yaml", (seconds, seconds))
    except (OSError, OverflowError):
        pytest.skip("this filesystem cannot hold that time")
    os.mkfifo(folder / "pipe")                                   # never opened by the walk
    with deadline(10):
        stamp, problem = find_stamp(folder, "s001", midterm, trust_file_times=True)
    assert stamp.source == "none" and "out of range" in problem and not assess(midterm, stamp).known


@pytest.mark.parametrize("record", [b"{", b'{"submitted_at": 1e999}', b'{"submitted_at": "NaN"}',
                                    b"[" * 100_000, b'{"submitted_at": "2026-04-20T10:00:00+08:00"}' + b" " * 10_000])
def test_a_bad_submission_record_is_unknown(tmp_path, midterm, record):
    folder = tmp_path / "s001"
    folder.mkdir()
    (folder / ".submission.json").write_bytes(record)
    stamp, problem = find_stamp(folder, "s001", midterm, trust_file_times=True)
    assert stamp.source == "none" and "lateness unknown" in problem and len(problem) < 200


# ---------------------------------------------------------------- the right source

def _exam_files(folder: Path, answers: str = "sqrt-dk-why: b\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.yaml").write_text(answers)
    return folder


def _homework(folder: Path) -> None:
    """What nbgrader collects of a student's first assignment (exercises 01-05)."""
    for name in ("03_masking.ipynb", "01_softmax.ipynb"):
        (folder / "attention").mkdir(parents=True, exist_ok=True)
        (folder / "attention" / name).write_text("{}")


def _collect(course, midterm, subs, tmp_path):
    with deadline(30):
        return collect_exam(subs, tmp_path / "work", course, midterm)


def test_homework_beside_an_exam_never_handed_in_is_not_the_exam(course, midterm, tmp_path):
    subs = tmp_path / "subs"
    _homework(subs / "s001")
    (subs / "s002" / "hw1" / "03_masking").mkdir(parents=True)       # a homework folder of any name
    (subs / "s002" / "hw1" / "03_masking" / "attention.py").write_text("x = 1\n")
    found, _ = _collect(course, midterm, subs, tmp_path)
    for student in ("s001", "s002"):
        assert found[student].tree is None and not found[student].handed_in
        assert any("no midterm exam" in p for p in found[student].problems)
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    for result in run.results:
        assert not result.submitted and result.points == 0 and result.status == "not_submitted"


def test_the_exam_folder_beside_homework_is_the_one_graded(course, midterm, tmp_path):
    subs = tmp_path / "subs"
    _homework(subs / "s001")
    _exam_files(subs / "s001" / "midterm-s001")
    _homework(subs / "s002")
    _exam_files(subs / "s002" / "my-exam")                        # a zip's top folder, say
    found, _ = _collect(course, midterm, subs, tmp_path)
    assert found["s001"].tree == subs / "s001" / "midterm-s001" and found["s001"].nbgrader
    assert found["s002"].tree == subs / "s002" / "my-exam" and not found["s002"].nbgrader


def test_only_the_exam_exercises_modules_are_copied_for_grading(course, midterm, tmp_path):
    tree = _exam_files(tmp_path / "s001")
    (tree / "03_masking").mkdir()
    (tree / "03_masking" / "attention.py").write_text("x = 1\n")
    os.mkfifo(tree / "03_masking" / "03_masking.ipynb")
    os.mkfifo(tree / "06_multihead.ipynb")
    (tree / "01_softmax").mkdir()
    (tree / "01_softmax" / "softmax.py").write_text("homework\n")
    (tree / "06_multihead").symlink_to(REPO_ROOT / "solutions" / "06_multihead")
    exercises = [course.exercise(item.id) for item in midterm.exercises]
    with deadline(10):
        skipped = stage_code(tree, exercises, tmp_path / "staged")
    copied = sorted(p.relative_to(tmp_path / "staged").as_posix() for p in (tmp_path / "staged").rglob("*") if p.is_file())
    assert copied == ["03_masking/attention.py"]
    assert sorted(skipped) == ["03_masking/03_masking.ipynb skipped: not a regular file",
                               "06_multihead.ipynb skipped: not a regular file"]


def test_a_folder_and_a_zip_of_one_student_are_refused(course, midterm, tmp_path):
    import zipfile

    subs = tmp_path / "subs"
    _exam_files(subs / "s001", "sqrt-dk-why: a\n")
    with zipfile.ZipFile(subs / "s001.zip", "w") as zf:
        zf.writestr("answers.yaml", "sqrt-dk-why: b\n")
    _exam_files(subs / "s002")
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    results = {r.student: r for r in run.results}
    refused = results["s001"]
    assert refused.status == "unreadable" and refused.points == 0 and "two sources" in refused.error
    assert "s001/" in refused.error and "s001.zip" in refused.error
    assert all(not v.answered for v in refused.questions)                     # neither source was read
    assert results["s002"].status == "graded" and any(v.answered for v in results["s002"].questions)


@pytest.mark.parametrize("suffix", [".ZIP", ".Zip"])
def test_a_folder_and_a_zip_of_any_case_are_one_student_refused(course, midterm, tmp_path, suffix):
    """As homework groups them (grader/intake/submissions.py): s001/ and
    s001.ZIP are one student's two sources, not a second student."""
    import zipfile

    subs = tmp_path / "subs"
    _exam_files(subs / "s001", "sqrt-dk-why: a\n")
    with zipfile.ZipFile(subs / f"s001{suffix}", "w") as zf:
        zf.writestr("answers.yaml", "sqrt-dk-why: b\n")
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    (refused,) = run.results
    assert refused.student == "s001" and refused.status == "unreadable" and "two sources" in refused.error
    assert f"s001{suffix}" in refused.error and all(not v.answered for v in refused.questions)


def _zip_of(folder: Path, archive: Path) -> None:
    import zipfile

    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder.parent).as_posix() if folder.name.startswith("midterm-")
                     else path.relative_to(folder).as_posix())


@pytest.mark.parametrize("record", ["nbgrader", "metadata"])
def test_a_later_zip_is_timed_as_itself_not_by_the_record_it_carries(course, midterm, tmp_path, record):
    """A collected folder's on-time record, zipped with other answers and
    handed in later: the zip's answers are graded, and its time is the
    zip's own (the manifest's, here none: lateness unknown), never the
    record it carries. With the manifest, the manifest's time."""
    on_time = midterm.starts_at + timedelta(minutes=30)
    collected = tmp_path / "collected" / ("midterm-s001" if record == "nbgrader" else "s001")
    _exam_files(collected, "sqrt-dk-why: b\n")
    if record == "nbgrader":
        (collected / NBGRADER_TIMESTAMP).write_text(on_time.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    else:
        (collected / ".submission.json").write_text(json.dumps({"submitted_at": on_time.isoformat()}))
    subs = tmp_path / "subs"
    subs.mkdir()
    _zip_of(collected, subs / "s001.zip")
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    (result,) = run.results
    assert result.status == "graded" and any(v.answered for v in result.questions)
    assert not result.lateness.known and result.lateness.source == "none", result.lateness
    assert any("s001.zip" in p and "not used" in p for p in result.problems), result.problems
    late = Stamp(midterm.starts_at + timedelta(hours=5), None, "manifest")
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w2",
                     manifest={"s001": late})
    assert run.results[0].lateness.source == "manifest" and run.results[0].lateness.flagged


def test_a_zip_inside_a_collected_folder_is_named_not_ignored(course, midterm, tmp_path):
    import zipfile

    subs = tmp_path / "subs"
    _exam_files(subs / "s001", "sqrt-dk-why: a\n")
    with zipfile.ZipFile(subs / "s001" / "midterm.zip", "w") as zf:
        zf.writestr("answers.yaml", "sqrt-dk-why: b\n")
    (subs / "s002").mkdir()
    with zipfile.ZipFile(subs / "s002" / "s002.zip", "w") as zf:
        zf.writestr("answers.yaml", "sqrt-dk-why: b\n")
    found, _ = _collect(course, midterm, subs, tmp_path)
    assert found["s001"].tree == subs / "s001"
    assert any("midterm.zip" in p and "not unpacked" in p for p in found["s001"].problems), found["s001"].problems
    assert found["s002"].tree is None and any("s002.zip" in p for p in found["s002"].problems)


def test_exam_files_beside_the_nbgrader_folder_are_named_not_read(course, midterm, tmp_path):
    subs = tmp_path / "subs"
    _exam_files(subs / "s001" / "midterm-s001", "sqrt-dk-why: a\n")
    _exam_files(subs / "s001", "sqrt-dk-why: b\n")
    found, _ = _collect(course, midterm, subs, tmp_path)
    assert found["s001"].tree == subs / "s001" / "midterm-s001"
    assert any("outside midterm-s001/" in p for p in found["s001"].problems), found["s001"].problems


@pytest.mark.parametrize("name", ["[red]boom[/red]", "bad\x1b[2Jname", "a b", "..hidden"])
def test_an_entry_that_names_no_student_is_named_escaped(course, midterm, tmp_path, name):
    subs = tmp_path / "subs"
    _exam_files(subs / name)
    found, problems = _collect(course, midterm, subs, tmp_path)
    assert found == {} and (problems == [] if name.startswith(".") else len(problems) == 1)
    assert all("\x1b" not in p for p in problems)


def test_visible_makes_control_characters_visible_and_bounds_the_length():
    assert visible("a\x1b[2J\x07\u202eb\ud800") == "a\\x1b[2J\\x07\\u202eb\\ud800"
    assert len(visible("x" * 10_000, 50)) == 50


# ---------------------------------------------------------------- the per-student boundary

@pytest.mark.parametrize("where", ["grader.exams.grading.read_answers", "grader.exams.grading.find_stamp",
                                   "grader.exams.grading.grade_one", "grader.exams.intake._exam_folder"])
def test_any_exception_reading_one_student_is_that_students_own(course, midterm, tmp_path, monkeypatch, where):
    import importlib

    subs = tmp_path / "subs"
    _exam_files(subs / "s001")
    _exam_files(subs / "victim", "sqrt-dk-why: victim\n")
    module, name = where.rsplit(".", 1)
    original = getattr(importlib.import_module(module), name)

    def explode(*args, **kwargs):
        if any("victim" in str(a) or getattr(a, "student", "") == "victim" for a in (*args, *kwargs.values())):
            raise RecursionError("student text that must not be shown [red]x[/red]")
        return original(*args, **kwargs)
    monkeypatch.setattr(importlib.import_module(module), name, explode)
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    results = {r.student: r for r in run.results}
    assert results["s001"].status == "graded" and any(v.answered for v in results["s001"].questions)
    victim = results["victim"]
    assert "must not be shown" not in json.dumps(victim.to_dict())
    if name == "grade_one":                                   # the one question, not the others
        (verdict,) = [v for v in victim.questions if v.question_id == "sqrt-dk-why"]
        assert verdict.reason == "the answer cannot be read" and verdict.points == 0
        assert victim.status == "graded"
        return
    shown = [victim.error, *victim.problems]
    assert sum("RecursionError" in p for p in shown) == 1     # recorded once
    assert victim.status == ("graded" if name == "find_stamp" else "unreadable")


@pytest.mark.parametrize("where", ["collect", "judge"])
def test_an_exception_with_one_students_code_is_that_students_own(course, midterm, tmp_path, monkeypatch, where):
    """Collecting or grading one student's code raises: their parts are
    ``unreadable`` (and not recorded, so a rerun tries again); the other
    student's code is graded."""
    import grader.exams.checks
    import grader.exams.grading
    from grader.judge import ExerciseResult

    subs = tmp_path / "subs"
    for student in ("s001", "victim"):
        (_exam_files(subs / student) / "03_masking").mkdir()
        (subs / student / "03_masking" / "attention.py").write_text("x = 1\n")

    class Judge:
        def __init__(self, student):
            self.student = student

        def grade(self, exercise, folder, workdir):
            if self.student == "victim" and where == "judge":
                raise MemoryError("student text [red]x[/red]")
            return ExerciseResult(exercise.id, "graded", "", [], exercise.points)
    monkeypatch.setattr(grader.exams.checks, "variant_judge", lambda course, sandbox, root, variant: Judge(variant.student))
    collect_code = grader.exams.grading._collect_code

    def collect(course, exercises, submission, workdir, root):
        if submission.student == "victim" and where == "collect":
            raise RecursionError("student text [red]x[/red]")
        return collect_code(course, exercises, submission, workdir, root)
    monkeypatch.setattr(grader.exams.grading, "_collect_code", collect)
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w", sandbox=object())
    results = {r.student: r for r in run.results}
    assert {p["status"] for p in results["s001"].exercises.values()} == {"graded"}
    victim = results["victim"].exercises
    assert set(victim) == {"03", "06"} and {p["status"] for p in victim.values()} == {"unreadable"}
    assert all("student text" not in p["reason"] and p["points"] == 0 for p in victim.values())


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), 2.0 ** 40, -1e12])
def test_file_times_no_datetime_holds_are_unusable(seconds):
    from grader.exams.timing import TimeUnusable, _from_mtime

    with pytest.raises(TimeUnusable):
        _from_mtime(seconds)


def test_exam_ids_that_are_one_identity_are_flagged(course, midterm, tmp_path):
    """The identity rule of watch and grade (grader/intake/identity.py) holds
    for exams too: S001 beside s001, or with a Cyrillic look-alike letter."""
    subs = tmp_path / "subs"
    for student in ("s001", "S001", "s002", "ѕ002"):      # the last one's first letter is Cyrillic
        _exam_files(subs / student, "sqrt-dk-why: a\n")
    run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "w")
    notes = [p for p in run.problems if "one identity" in p]
    assert len(notes) == 1 and notes[0].startswith("S001, s001"), run.problems
    # A look-alike letter is no usable exam id at all: skipped with the reason, never a second s002.
    assert "skipped 'ѕ002': not a usable student id" in run.problems
    assert sorted(r.student for r in run.results) == ["S001", "s001", "s002"]
