"""An exam from roster to report: build 30 students' folders, simulate their
submissions (right, partly wrong, copied, zipped, broken, late, absent),
grade the answers, and check the statistics, the outputs and the CLI."""
import csv
import json
import shutil
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import yaml
from browser import CHROMIUM, render
from typer.testing import CliRunner

from grader.cli import app
from grader.course import REPO_ROOT, load_course
from grader.exams.build import RosterError, read_roster
from grader.exams.build_class import build_exam
from grader.exams.grading import grade_exam
from grader.exams.questions import answer_keys
from grader.exams.report import write_exam_outputs
from grader.exams.stats import exam_stats
from grader.exams.timing import METADATA_FILE, read_manifest
from grader.gradebook import Gradebook

SECRET = b"test-secret-not-for-real-exams-0123"
STUDENTS = [f"s{i:03d}" for i in range(30)]


@pytest.fixture(scope="module")
def roster_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("roster") / "roster.csv"
    rows = [{"student_id": s, "name": f"Student {s}", "extra_time_min": "30" if s == "s005" else ""} for s in STUDENTS]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["student_id", "name", "extra_time_min"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def built(course, midterm, roster_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("exam")
    started = time.perf_counter()
    variants = build_exam(course, midterm, read_roster(roster_file), SECRET, out, REPO_ROOT)
    return out, {v.student: v for v in variants}, time.perf_counter() - started


def _write_answers(folder, answers):
    (folder / "answers.yaml").write_text(yaml.safe_dump(answers, allow_unicode=True), encoding="utf-8")


def _stamp(folder, when):
    (folder / METADATA_FILE).write_text(json.dumps({"submitted_at": when.isoformat()}), encoding="utf-8")


@pytest.fixture(scope="module")
def graded(course, midterm, built, roster_file, tmp_path_factory):
    """Submissions of the class, graded (answers only: no sandbox needed)."""
    out, variants, _ = built
    keys = answer_keys(course, midterm, list(variants.values()), REPO_ROOT)
    solved = {s: {q: k.model_answer() for q, k in keys[s].items()} for s in STUDENTS}
    subs = tmp_path_factory.mktemp("submissions")
    due = midterm.starts_at + timedelta(minutes=midterm.time_limit_min)
    for i, student in enumerate(STUDENTS[:28]):                      # s028, s029: absent
        folder = subs / student
        shutil.copytree(out / student, folder)
        answers = dict(solved[student])
        if 10 <= i < 20:                                             # two questions most get wrong
            wrong = next(c.letter for c in _shown(course, midterm, variants[student], "sqrt-dk-why").choices
                         if c.original == 1)                         # the bank's "so that weights sum to one"
            answers.update({"sqrt-dk-why": wrong, "mha-parameters": 3 * variants[student].sizes["d_model"] ** 2})
        if 20 <= i < 25:                                             # copied from s000
            answers = dict(solved["s000"])
        _write_answers(folder, answers)
        _stamp(folder, due - timedelta(minutes=10))
    (subs / "s026" / "answers.yaml").write_text("sqrt-dk-why: b\n\tbroken: [\n", encoding="utf-8")
    _stamp(subs / "s027", due + timedelta(minutes=20))               # late: 20 - 5 grace = 15 min at 1 %
    _stamp(subs / "s005", due + timedelta(minutes=20))               # late, but has 30 extra minutes
    shutil.make_archive(str(subs / "s025"), "zip", subs / "s025")    # a zip instead of a folder
    shutil.rmtree(subs / "s025")
    # The collection system's export: a zip has no metadata file of its own.
    stamps = tmp_path_factory.mktemp("stamps") / "timestamps.csv"
    stamps.write_text(f"student_id,submitted_at\ns025,{(due - timedelta(minutes=1)).isoformat()}\n")
    db = tmp_path_factory.mktemp("book") / "grades.db"
    with Gradebook(db) as book:
        run = grade_exam(course, midterm, subs, secret=SECRET, root=REPO_ROOT, workdir=tmp_path_factory.mktemp("work"),
                         roster=read_roster(roster_file), manifest=read_manifest(stamps, midterm), gradebook=book)
    return run, {r.student: r for r in run.results}, db


def _shown(course, exam, variant, question_id):
    from grader.exams.questions import shown_questions

    return next(q for q in shown_questions(course, exam, variant) if q.id == question_id)


# ---------------------------------------------------------------- build

def test_build_writes_one_folder_per_student(built, midterm):
    out, variants, seconds = built
    assert sorted(p.name for p in out.iterdir()) == sorted(STUDENTS + ["_instructor"])
    folder = out / "s001"
    for name in ["README.md", "questions.md", "answers.yaml", "variant.json", "course.yaml", "conftest.py",
                 "03_masking/attention.py", "03_masking/test_attention.py", "03_masking/test_variant.py",
                 "06_multihead/multihead.py", "06_multihead/causal_attention.py", "06_multihead/test_variant.py"]:
        assert (folder / name).is_file(), name
    assert json.loads((folder / "variant.json").read_text()) == variants["s001"].public()
    template = yaml.safe_load((folder / "answers.yaml").read_text())
    assert list(template) == midterm.questions and all(v is None for v in template.values())
    assert seconds < 10, f"building 30 folders took {seconds:.1f} s"


def test_student_folders_hold_no_secret(built, course):
    from grader.release.student_repo import find_leaks

    out, variants, _ = built
    assert find_leaks(out / "s002", course, REPO_ROOT) == []     # no reference, variant or hidden-check line
    reference = (REPO_ROOT / "solutions" / "03_masking" / "attention.py").read_text()
    for path in (out / "s002").rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert "correct: true" not in text and str(variants["s002"].seed) not in text, path
            assert text != reference, path
    assert (out / "s002" / "03_masking" / "attention.py").read_text() == \
        (REPO_ROOT / "exercises" / "03_masking" / "attention.py").read_text()


def test_questions_show_the_students_numbers(built, course, midterm):
    out, variants, _ = built
    for student in ("s001", "s002"):
        s = variants[student].sizes
        text = (out / student / "questions.md").read_text(encoding="utf-8")
        assert f"MultiHeadAttention({s['d_model']}, {s['d_model']}, {s['context_length']}, 0.0, num_heads={s['heads']})" in text
        assert "多头" in (out / student / "README.md").read_text(encoding="utf-8")


def test_roster_errors_name_the_line(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("student_id,extra_time_min\ns1,\ns1,\n")
    with pytest.raises(RosterError, match="line 3"):
        read_roster(path)
    path.write_text("name\nAda\n")
    with pytest.raises(RosterError, match="student_id"):
        read_roster(path)
    path.write_text("student_id\n../etc\n")
    with pytest.raises(RosterError, match="line 2"):
        read_roster(path)


def _run_variant_tests(folder):
    report = folder / "outcomes.json"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "03_masking/test_variant.py", "06_multihead/test_variant.py"],
                         cwd=folder, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO_ROOT), "COURSEKIT_REPORT": str(report), "PATH": ""})
    return run, {o["nodeid"].split("::")[-1]: o for o in json.loads(report.read_text())}


def test_public_tests_use_the_students_sizes(built, tmp_path):
    """With the references the exam's tests pass; with a known mistake in
    06 (heads split without transpose) they fail, and the hint names it."""
    from grader.course.pitfalls import load_variants

    out, _, _ = built
    folder = tmp_path / "s003"
    shutil.copytree(out / "s003", folder)
    shutil.copyfile(REPO_ROOT / "solutions" / "03_masking" / "attention.py", folder / "03_masking" / "attention.py")
    course = load_course(check_files=False)
    mistaken = load_variants(course.exercise("06"), REPO_ROOT)["view-no-transpose"].source
    (folder / "06_multihead" / "multihead.py").write_text(mistaken, encoding="utf-8")
    run, outcomes = _run_variant_tests(folder)
    assert {n for n, o in outcomes.items() if o["outcome"] == "failed"} == {
        "test_split_heads_of_your_sizes", "test_multihead_attention_of_your_sizes"}, run.stdout
    assert "view-no-transpose" in outcomes["test_split_heads_of_your_sizes"]["pitfalls"]
    assert all(outcomes[n]["outcome"] == "passed" for n in outcomes if n.startswith("test_") and "03" not in n
               and n not in {"test_split_heads_of_your_sizes", "test_multihead_attention_of_your_sizes"})
    assert sum(o["outcome"] == "passed" for o in outcomes.values()) == 5


# ---------------------------------------------------------------- grading

def test_reference_solved_answers_score_full_marks(graded):
    _, results, _ = graded
    for student in [*STUDENTS[:10], "s025"]:                        # s025 submitted a zip
        r = results[student]
        assert r.question_points == r.question_max and r.points == r.max_points, (student, r.problems)


def test_copied_answers_score_low(graded):
    _, results, _ = graded
    for student in STUDENTS[20:25]:
        assert results[student].question_points < 0.5 * results[student].question_max


def test_copied_answers_are_listed_and_honest_mistakes_are_not(graded):
    """Answers on s000's key, not their own (grader/exams/copying.py); the
    five copiers share their wrong answers with each other too; the ten with
    two honest mistakes each are not listed."""
    run, _, _ = graded
    listed = {(m.student, m.other) for m in run.copying.key_matches}
    copiers = set(STUDENTS[20:25])
    assert {(s, "s000") for s in copiers} <= listed
    assert all(student in copiers and other in copiers | {"s000"} for student, other in listed), listed


def test_absent_broken_and_late_submissions(graded):
    _, results, _ = graded
    for student in ("s028", "s029"):
        assert not results[student].submitted and results[student].points == 0
        assert "nothing submitted" in results[student].problems
    assert any("line by line" in p for p in results["s026"].problems)
    late = results["s027"].lateness
    assert late.flagged and late.late_min == 20 and late.factor == pytest.approx(0.85) and late.source == "metadata"
    assert results["s027"].points == pytest.approx(0.85 * results["s027"].raw_points)
    assert not results["s005"].lateness.flagged                      # 30 extra minutes on the roster
    assert results["s025"].lateness.source == "manifest"


def test_statistics_put_the_most_missed_questions_first(graded, course, midterm):
    run, _, _ = graded
    stats = exam_stats(course, midterm, run.results)
    assert stats["summary"]["students"] == 30 and stats["summary"]["submitted"] == 28
    questions = stats["questions"]
    assert [q["rate"] for q in questions] == sorted(q["rate"] for q in questions)
    first_two = {q["id"] for q in questions[:2]} | {q["id"] for q in questions if q["rate"] == questions[1]["rate"]}
    assert {"sqrt-dk-why", "mha-parameters"} <= first_two
    sqrt_dk = next(q for q in questions if q["id"] == "sqrt-dk-why")
    assert sqrt_dk["wrong_choices"][0]["text"]["en"] == "So that each query's weights sum to one."
    assert sqrt_dk["wrong_choices"][0]["students"] >= 10
    json.dumps(stats)                                                # plain data


def test_outputs_and_report(graded, course, tmp_path):
    run, _, _ = graded
    paths = write_exam_outputs(course, run, tmp_path)
    rows = list(csv.DictReader(paths["grades"].open(encoding="utf-8")))
    assert len(rows) == 30 and rows[27]["late_factor"] == "0.85"
    html = paths["report"].read_text(encoding="utf-8")
    assert "Questions, most missed first" in html and "sqrt-dk-why" in html and "期中考试" in html
    assert "answers only" in html
    data = json.loads(paths["results"].read_text(encoding="utf-8"))
    assert len(data["results"]) == 30 and not data["code_graded"]


def test_the_gradebook_holds_each_students_exam_total(graded, course, midterm):
    run, results, db = graded
    with Gradebook(db) as book:
        rows = {r.key.student: r for r in book.records(course.course.version) if r.key.exercise == "midterm"}
    assert set(rows) == set(STUDENTS)
    assert {s: (r.points, r.max_points) for s, r in rows.items()} == \
        {s: (results[s].points, results[s].max_points) for s in STUDENTS}
    assert rows["s027"].status == "late" and rows["s028"].status == "not_submitted" and rows["s000"].status == "graded"


def test_the_class_report_shows_the_exam_recorded_in_the_gradebook(graded, course, midterm, tmp_path):
    """The statistics rebuilt from grades.db are the run's own, and
    `grader grade`'s class report (write_html_report) shows them."""
    from grader.exams.records import exam_results, recorded_exam_stats
    from grader.report import write_html_report

    run, _, db = graded
    with Gradebook(db) as book:
        records = list(book.records(course.course.version))
    assert exam_stats(course, midterm, exam_results(course, midterm, records)) == exam_stats(course, midterm, run.results)
    index = write_html_report(course, records, tmp_path / "report", exam_stats=recorded_exam_stats(course, records))
    html = index.read_text(encoding="utf-8")
    assert "Exam: Midterm: attention" in html and "sqrt-dk-why" in html and "Questions, most missed first" in html
    assert "Checks, hardest first" not in html                       # no exercise was graded into this gradebook
    assert "⟨d_model⟩" in html and "{d_model}" not in html             # a size each student saw as their own
    without = write_html_report(course, [], tmp_path / "plain").read_text(encoding="utf-8")
    assert "Exam:" not in without
    if CHROMIUM:  # the exam section in a real browser (.ci/run installs chromium)
        render(index, tmp_path)


# ---------------------------------------------------------------- the command line

def test_cli_variant_build_and_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    runner = CliRunner()
    (tmp_path / "roster.csv").write_text("student_id\nabc\nxyz\n")
    (tmp_path / "abc.csv").write_text("student_id\nabc\n")
    result = runner.invoke(app, ["exam", "variant", "midterm", "abc", "--json"])
    assert result.exit_code == 0, result.output
    variant = json.loads(result.output)
    assert variant["student"] == "abc" and set(variant["answers"]) == set(load_course(check_files=False).exam("midterm").questions)
    result = runner.invoke(app, ["exam", "build", "midterm", "--roster", str(tmp_path / "roster.csv"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "xyz" / "answers.yaml").is_file()
    subs = tmp_path / "subs"
    shutil.copytree(tmp_path / "out" / "abc", subs / "abc")
    (subs / "abc" / "answers.yaml").write_text(yaml.safe_dump({q: a for q, a in variant["answers"].items()
                                                                if "|" not in a and "," not in a}))
    result = runner.invoke(app, ["exam", "grade", "midterm", str(subs), "--answers-only", "--out", str(tmp_path / "g"),
                                 "--roster", str(tmp_path / "abc.csv"), "--db", str(tmp_path / "grades.db")])
    assert result.exit_code == 0, result.output
    assert "graded 1 student(s) (answers only)" in result.output
    assert json.loads((tmp_path / "g" / "results.json").read_text())["results"][0]["question_points"] > 0
    assert (tmp_path / "g" / "report.html").is_file()


def test_cli_without_a_secret_says_where_to_put_one(monkeypatch):
    monkeypatch.delenv("GRADER_EXAM_SECRET", raising=False)
    monkeypatch.chdir(REPO_ROOT)
    if (REPO_ROOT / ".exam-secret").exists():
        pytest.skip("this checkout has an exam secret file")
    result = CliRunner().invoke(app, ["exam", "variant", "midterm", "abc"])
    assert result.exit_code == 2 and "GRADER_EXAM_SECRET" in result.output


def test_the_demo_midterm(tmp_path, monkeypatch):
    """examples/make_exam_submissions.py (the README's demo): alice right,
    bob two answers wrong, carol 20 minutes late; graded into the gradebook."""
    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    done = subprocess.run([sys.executable, "examples/make_exam_submissions.py", str(tmp_path / "exam")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = CliRunner().invoke(app, ["exam", "grade", "midterm", str(tmp_path / "exam" / "submissions"),
                                      "--answers-only", "--roster", str(tmp_path / "exam" / "roster.csv"),
                                      "--out", str(tmp_path / "out"), "--db", str(tmp_path / "grades.db")])
    assert result.exit_code == 0, result.output
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "out" / "grades.csv").open(encoding="utf-8"))}
    assert rows["alice"]["questions"] == rows["alice"]["questions_max"] and rows["alice"]["late_factor"] == "1"
    assert float(rows["bob"]["questions"]) < float(rows["bob"]["questions_max"])
    assert rows["carol"]["late_factor"] == "0.85"
    with Gradebook(tmp_path / "grades.db") as book:
        assert {r.key.student for r in book.records(load_course().course.version)} == {"alice", "bob", "carol"}

