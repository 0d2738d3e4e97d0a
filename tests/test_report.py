"""Reports: CSV and JSON exports, the class and student pages, checked in a
real browser (headless Chromium: the page renders, no console error, every
image is there)."""
import csv
import json
import re
from html import unescape

import pytest
from browser import CHROMIUM, render

from grader.gradebook import Gradebook, Key
from grader.report import svg, write_grades_csv, write_html_report, write_results_json


LEAK = "hidden-0.4375"  # stands for anything a submission's error could quote


def _verdict(check_id, passed, points, max_points, pitfalls=(), confirmed=(), *, kind=None, reason=None,
             detail=""):
    possible = [p for p in pitfalls if p not in confirmed]
    return {"check_id": check_id, "passed": passed, "points": points, "max_points": max_points,
            "message": {"en": f"what {check_id} checks", "zh": f"{check_id} 检查的内容"},
            "reason": reason if reason is not None else "" if passed else "wrong values",
            "pitfalls": list(pitfalls), "confirmed": list(confirmed), "possible": possible,
            "kind": kind if kind is not None else "" if passed else "wrong values", "instructor_detail": detail}


@pytest.fixture
def records(tmp_path, course):
    version = course.course.version
    with Gradebook(tmp_path / "grades.db") as book:
        book.record(Key("alice", "01", "h1", version), points=10, max_points=10, status="graded", reason="",
                    verdicts=[_verdict("01-a", True, 5, 5), _verdict("01-b", True, 5, 5)])
        book.record(Key("bob", "01", "h2", version), points=5, max_points=10, status="graded", reason="",
                    verdicts=[_verdict("01-a", True, 5, 5),
                              _verdict("01-b", False, 0, 5, ["softmax-overflow"], ["softmax-overflow"])])
        book.record(Key("bob", "03", "h3", version), points=0, max_points=15, status="timeout",
                    reason="timed out after 60 s (the course's limit) during call 1 of 9, in check 03-a / 运行超时",
                    verdicts=[_verdict("03-a", False, 0, 5, kind="not_run", reason="could not run",
                                       detail=f"timed out after 60 s during call 1 (coursekit.probes.masking:x)"),
                              _verdict("03-b", False, 0, 5, kind="not_run", reason="could not run"),
                              _verdict("03-c", False, 0, 5, kind="not_run", reason="could not run")],
                    figures={"causal-weights": {"title": {"en": "weights on six words", "zh": "六个词上的权重"},
                                                "student": None, "expected": [[1.0, 0.0], [0.5, 0.5]]}})
        book.record(Key("<script>", "01", "h4", version), points=0, max_points=10, status="not_submitted",
                    reason="", verdicts=[_verdict("01-a", False, 0, 5, kind="not_run", reason="not submitted"),
                                         _verdict("01-b", False, 0, 5, kind="not_run", reason="not submitted")])
        book.record(Key("carol", "01", "h5", version), points=0, max_points=10, status="graded", reason="",
                    verdicts=[_verdict("01-a", False, 0, 5, kind="raised ValueError", reason="raised ValueError",
                                       detail=f"ValueError: \x1b[2J{LEAK}"),
                              _verdict("01-b", False, 0, 5, ["softmax-overflow", "softmax-dim0",
                                                              "softmax-wrong-dim"])])
        return list(book.records(version))


def test_csv_and_json_exports(records, tmp_path):
    write_grades_csv(records, tmp_path / "grades.csv")
    rows = list(csv.DictReader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert [(r["student"], r["exercise"], r["points"], r["status"]) for r in rows] == [
        ("<script>", "01", "0", "not_submitted"), ("alice", "01", "10", "graded"),
        ("bob", "01", "5", "graded"), ("bob", "03", "0", "timeout"), ("carol", "01", "0", "graded")]
    write_results_json(records, tmp_path / "results.json")
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    bob = next(r for r in data if r["student"] == "bob" and r["exercise"] == "01")
    assert bob["checks"][1] == {"id": "01-b", "passed": False, "points": 0, "max_points": 5,
                                "message": {"en": "what 01-b checks", "zh": "01-b 检查的内容"},
                                "reason": "wrong values", "pitfalls": ["softmax-overflow"],
                                "confirmed": ["softmax-overflow"], "possible": []}
    # The raw error is the instructor's: never in the exports.
    assert LEAK not in (tmp_path / "results.json").read_text() and LEAK not in (tmp_path / "grades.csv").read_text()


def test_pages_show_hints_and_escape_what_students_control(records, tmp_path, course):
    index = write_html_report(course, records, tmp_path / "report")
    bob = (tmp_path / "report" / "students" / "bob.html").read_text(encoding="utf-8")
    assert course.pitfall("softmax-overflow").hint.en in bob and course.pitfall("softmax-overflow").hint.zh in bob
    assert "matches this mistake exactly" in bob and "timed out after 60 s (the course&#39;s limit)" in bob
    assert "weights on six words" in bob and "六个词上的权重" in bob
    assert bob.count('<svg class="heatmaps"') == 1 and "no result" in bob  # bob's 03 timed out: no weights of his
    assert '<svg class="chart"' in bob  # his scores next to the class mean
    assert "<script>" not in index.read_text(encoding="utf-8")  # a hostile student id is escaped
    for page in [index, *(tmp_path / "report" / "students").glob("*.html")]:
        for src in re.findall(r'src="([^"]+)"', page.read_text(encoding="utf-8")):   # self-contained pages
            assert src.startswith("data:image/svg+xml;base64,"), f"{page.name}: an image beside the page: {src}"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_pages_render_in_chromium_without_console_errors(records, tmp_path, course):
    index = write_html_report(course, records, tmp_path / "report")
    for page in (index, tmp_path / "report" / "students" / "bob.html", tmp_path / "report" / "students" / "carol.html",
                 tmp_path / "report" / "errors.html"):
        render(page, tmp_path)


def test_export_csv_for_an_lms(records, tmp_path, course):
    from typer.testing import CliRunner

    from grader.cli import app

    db = tmp_path / "grades.db"  # the `records` fixture wrote it
    result = CliRunner().invoke(app, ["export", "csv", str(tmp_path / "wide.csv"), "--db", str(db), "--wide"])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(open(tmp_path / "wide.csv", encoding="utf-8")))
    assert rows[0][0] == "student" and rows[0][-2:] == ["total", "max"] and len(rows[0]) == len(course.exercises) + 3
    bob = next(row for row in rows if row[0] == "bob")
    assert bob[1] == "5" and bob[3] == "0" and bob[-2:] == ["5", f"{sum(e.points for e in course.exercises):g}"]
    script = next(row for row in rows if row[0] == "<script>")
    assert script[1] == "" and script[-2] == "0"      # not handed in: a blank cell, not a 0
    result = CliRunner().invoke(app, ["export", "csv", str(tmp_path / "long.csv"), "--db", str(db)])
    assert result.exit_code == 0 and "4 students, 5 results" in result.output


def test_student_figures_are_inline_svg_on_the_expected_colour_scale():
    expected = [[0.0, 1.0], [0.5, 0.5]]
    drawn = str(svg.side_by_side([[1.0, float("nan")], [0.5, 0.5], [2.0, -1.0]], expected, "<b>weights</b>"))
    low, high, middle = svg.viridis(0.0), svg.viridis(1.0), svg.viridis(0.5)
    cells = re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" fill="(#[0-9a-f]{6})"/>', drawn)
    # Yours (3 x 2, a NaN, values beyond the scale clipped), then expected (2 x 2), then the colour bar.
    assert cells[:6] == [high, svg.NO_VALUE, middle, middle, high, low]
    assert cells[6:10] == [low, high, middle, middle]
    assert "<title>&lt;b&gt;weights&lt;/b&gt;</title>" in drawn and "<b>" not in drawn
    bars = str(svg.score_bars(["01", "<02>"], [1.0, 0.25], [0.5, 0.5]))
    assert "01 you: 100%" in bars and "&lt;02&gt; class mean: 50%" in bars and "<02>" not in bars


def _text(html: str) -> str:
    """A page's visible words (tags dropped, whitespace collapsed)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_a_cause_that_broke_the_run_is_said_once_and_the_checks_it_stopped_are_listed_briefly(
        records, tmp_path, course):
    write_html_report(course, records, tmp_path / "report")
    bob = _text((tmp_path / "report" / "students" / "bob.html").read_text(encoding="utf-8"))
    assert bob.count("timed out after 60 s") == 1
    assert "Could not run or finish, for the reason above · 因上述原因未能运行或完成 (3): 03-a, 03-b, 03-c" in bob
    assert "could not run" not in bob.lower().replace("could not run or finish", "")  # no per-check repetition
    assert "coursekit.probes" not in bob  # an internal probe name never reaches a student


def test_not_submitted_is_said_once_in_both_languages(records, tmp_path, course):
    write_html_report(course, records, tmp_path / "report")
    page = next((tmp_path / "report" / "students").glob("_script_-*.html"))
    text = _text(page.read_text(encoding="utf-8"))
    assert "not submitted 未提交" in text
    # Once per exercise in the table (01, and 03 which another student handed in), never "X: X".
    assert "not submitted: not submitted" not in text and text.count("not submitted") == 2


def test_statuses_come_from_one_table_in_both_languages(tmp_path, course):
    from grader.feedback import STATUSES
    from grader.sandbox.model import STATUSES as RUN_STATUSES

    assert {"graded", "not_started", "not_submitted", "unreadable", "protocol_error", "tampered",
            *RUN_STATUSES} - {"ok"} <= set(STATUSES)
    assert all(text.en and text.zh and text.en != text.zh for text in STATUSES.values())
    version = course.course.version
    with Gradebook(tmp_path / "grades.db") as book:
        for i, status in enumerate(STATUSES):
            book.record(Key(f"s{i}", "01", "h", version), points=0, max_points=10, status=status, reason="",
                        verdicts=[_verdict("01-a", False, 0, 10, kind="not_implemented", reason="not implemented yet")])
        rows = list(book.records(version))
    write_html_report(course, rows, tmp_path / "report")
    for i, (status, words) in enumerate(STATUSES.items()):
        page = _text((tmp_path / "report" / "students" / f"s{i}.html").read_text(encoding="utf-8"))
        assert f"{words.en} {words.zh}" in page, status
        assert status not in page.replace(words.en, "") or status == "late", status  # never the raw status id


def test_confirmed_mistakes_come_first_and_possible_ones_are_marked_and_at_most_two(records, tmp_path, course):
    write_html_report(course, records, tmp_path / "report")
    html = (tmp_path / "report" / "students" / "carol.html").read_text(encoding="utf-8")
    # Three unconfirmed pitfalls were recorded; the page offers two, each marked "possibly".
    possible = re.findall(r'<div class="hint possible"><span class="id">possibly · 可能 \[([\w-]+)\]', html)
    assert len(possible) == 2 and set(possible) < {"softmax-overflow", "softmax-dim0", "softmax-wrong-dim"}
    assert 'class="hint confirmed"' not in html
    bob = (tmp_path / "report" / "students" / "bob.html").read_text(encoding="utf-8")
    assert bob.index('class="hint confirmed"') < bob.index('class="check"')
    assert "confirmed · 已确认 [softmax-overflow]" in bob


def test_raw_errors_are_for_the_instructor_only(records, tmp_path, course):
    write_html_report(course, records, tmp_path / "report")
    for page in (tmp_path / "report" / "students").glob("*.html"):
        assert LEAK not in page.read_text(encoding="utf-8"), page.name
    errors = (tmp_path / "report" / "errors.html").read_text(encoding="utf-8")
    assert LEAK in errors and "\x1b" not in errors and "\\x1b[2J" in errors  # escape bytes shown, not sent
    assert "raised ValueError" in (tmp_path / "report" / "students" / "carol.html").read_text(encoding="utf-8")


def test_source_problems_are_found_by_parsing_never_by_running():
    from grader.feedback import source_problem

    assert source_problem(b"def softmax(x, dim=-1):\n    return x\n", "softmax.py") is None
    assert source_problem(b"import os\ndef f(:\n", "softmax.py")[:3] == ("syntax", 2, 7)
    assert source_problem(b'x = 1\nNAME = "caf\xe9"\n', "softmax.py")[:2] == ("encoding", 2)
    assert source_problem(b"x = 1\0\n", "softmax.py")[:2] == ("null", 1)
    # A cookie Python honours is no encoding problem; parsing never imports or runs the module.
    assert source_problem(b'# coding: latin-1\nx = "\xe9"\nraise SystemExit(1)\n', "softmax.py") is None


def test_a_student_defined_exception_class_is_never_named():
    from grader.feedback import FOREIGN_EXCEPTION, exception_name

    assert exception_name("ValueError") == "ValueError" and exception_name("OutOfMemoryError") == "OutOfMemoryError"
    assert exception_name("Leak_0_4375") == FOREIGN_EXCEPTION and exception_name(None) == FOREIGN_EXCEPTION


def test_missing_names_come_from_the_stub_and_are_unknown_when_the_module_is_dynamic():
    from grader.feedback import missing_names

    stub = b"def softmax(x, dim=-1):\n    raise NotImplementedError\n\n\ndef _helper():\n    pass\n"
    assert missing_names(b"def softmx(x, dim=-1):\n    return x\n", stub) == ["softmax"]
    assert missing_names(b"from torch import softmax\n", stub) == []
    assert missing_names(b"if True:\n    softmax = len\n", stub) == []
    # A module __getattr__ or a star import: names cannot be known without running it.
    assert missing_names(b"def __getattr__(name):\n    raise AttributeError(name)\n", stub) == []
    assert missing_names(b"from math import *\n", stub) == []


def test_torch_shape_errors_are_told_by_kind_and_their_numbers_are_not_copied():
    import torch

    from grader.feedback import shape_error_kind

    def error_of(operation) -> tuple[str, str]:
        try:
            operation()
        except Exception as exc:  # noqa: BLE001 - torch's own errors, captured to classify
            return type(exc).__name__, str(exc)
        raise AssertionError("no error")

    a, b = torch.ones(2, 3, 4), torch.ones(2, 5, 6)
    cases = {"matmul": [lambda: a @ b, lambda: torch.bmm(a, b), lambda: torch.ones(3, 4) @ torch.ones(5, 6)],
             "broadcast": [lambda: a + torch.ones(2, 7, 4)],
             "view": [lambda: a.view(5, 5)],
             "dim": [lambda: a.transpose(0, 5)]}
    for kind, operations in cases.items():
        for operation in operations:
            error_type, message = error_of(operation)
            found = shape_error_kind(error_type, message)
            assert found is not None and found[0] == kind, (kind, message)
            assert not any(ch.isdigit() for ch in found[1])  # fixed words: no size is copied
    assert shape_error_kind("RuntimeError", "something else entirely") is None
    assert shape_error_kind("Leak_1", "mat1 and mat2 shapes cannot be multiplied") is None


def test_gradescope_results_mark_possible_hints_and_carry_no_raw_error(records, course):
    from grader.scale.gradescope import results_json

    carol = [r for r in records if r.key.student == "carol"]
    data = results_json(course, carol)
    outputs = "\n".join(test["output"] for test in data["tests"])
    assert LEAK not in str(data) and "raised ValueError" in outputs
    assert outputs.count("Possibly (this mistake fails the check the same way)") == 2  # of three recorded
    bob_timeout = [r for r in records if r.key.student == "bob" and r.key.exercise == "03"]
    note = results_json(course, bob_timeout)["output"]
    assert note.startswith("03_masking: timed out / 超时: timed out after 60 s") and "coursekit" not in note
    missing = [r for r in records if r.key.student == "<script>"]
    assert results_json(course, missing)["output"] == "01_softmax: not submitted / 未提交"


# --- issue 15: a class report an instructor can use; feedback handed back per student

def _with_stub_and_exam(tmp_path, course, records):
    """The fixture's class plus dave, who left 01 as the stub (every check
    failed), and an exam total for alice (late) and bob."""
    from grader.report.html import check_difficulty  # noqa: F401  (imported by the tests below)

    exam = course.exams[0]
    version = course.course.version
    with Gradebook(tmp_path / "grades.db") as book:
        book.record(Key("dave", "01", "h6", version), points=0, max_points=10, status="not_started", reason="",
                    verdicts=[_verdict("01-a", False, 0, 5, kind="not implemented", reason="not implemented yet"),
                              _verdict("01-b", False, 0, 5, kind="not implemented", reason="not implemented yet")])
        question = {"question_id": "q-scale", "kind": "short", "points": 2.0, "max_points": 2.0, "correct": True,
                    "answered": True, "given": "<i>sqrt(d_k)</i>", "expected": "KEY-NEVER-SHOWN", "reason": ""}
        book.record(Key("alice", exam.id, "e1", version), points=12.5, max_points=40, status="late",
                    reason="late by 12 min: x0.8", verdicts=[question])
        book.record(Key("bob", exam.id, "e2", version), points=30, max_points=40, status="graded", reason="",
                    verdicts=[{**question, "correct": False, "points": 0.0, "given": "d_k"}])
        return exam, list(book.records(version))


def test_hardest_checks_count_only_students_who_attempted(records, tmp_path, course):
    from grader.report.html import check_difficulty

    exam, everything = _with_stub_and_exam(tmp_path, course, records)
    exercises_only = [r for r in everything if r.key.exercise != exam.id]
    rows = {cid: (rate, n) for cid, rate, n, _ in check_difficulty(exercises_only)}
    # 01-a: alice, bob pass; carol fails; <script> (not submitted) and dave (stub) do not count.
    assert rows["01-a"] == (pytest.approx(2 / 3), 3)
    assert "03-a" in rows and rows["03-a"] == (0.0, 1)   # a timeout is an attempt
    index = _text(write_html_report(course, everything, tmp_path / "report").read_text())
    assert "attempted" in index and "67%" in index


def test_class_report_has_contents_sections_students_per_pitfall_and_the_exam(records, tmp_path, course):
    exam, everything = _with_stub_and_exam(tmp_path, course, records)
    index = write_html_report(course, everything, tmp_path / "report")
    html = index.read_text()
    assert '<nav class="toc">' in html and html.count("<details") >= 3
    for anchor in re.findall(r'href="#([\w-]+)"', html):
        assert f'id="{anchor}"' in html, anchor
    # the pitfall row names its students, linked to their pages
    row = next(r for r in html.split("<tr>") if "<code>softmax-overflow</code>" in r)
    assert 'href="students/bob.html">bob</a>' in row and 'carol' in row and "alice" not in row
    # the exam is a column of the class table, per student; "–" where nothing is recorded
    table = html.split('id="students"')[1].split("</table>")[0]
    assert f"exam {exam.id}" in table and "12.5 / 40" in table and "30 / 40" in table
    alice = _text((tmp_path / "report" / "students" / "alice.html").read_text())
    assert "12.5 / 40" in alice and "sqrt(d_k)" in alice and "KEY-NEVER-SHOWN" not in alice
    assert "<i>sqrt" not in (tmp_path / "report" / "students" / "alice.html").read_text()  # escaped


def test_count_axes_have_whole_ticks(tmp_path):
    from collections import Counter

    from grader.report import plots

    plots.pitfall_counts(Counter({"a": 1, "b": 2, "c": 3}), tmp_path / "p.svg")
    plots.score_histogram([10.0, 55.0, 56.0], tmp_path / "h.svg")
    for name in ("p.svg", "h.svg"):
        svg = (tmp_path / name).read_text()
        # tick labels are the texts that are plain numbers (the histogram's 0-100 % axis included)
        ticks = re.findall(r">(-?[0-9.]+)</text>", svg)
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), (name, ticks)
    # the count axis reaches the highest count, in whole steps
    assert ">3</text>" in (tmp_path / "p.svg").read_text()


def test_class_figures_are_svg_drawn_without_matplotlib(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from collections import Counter; from pathlib import Path; from grader.report import plots; "
            f"p = Path({str(tmp_path)!r}); "
            "plots.score_histogram([5.0, 95.0, 100.0], p / 'h.svg'); "
            "plots.pass_rates(['01_softmax', '<b>'], [0.5, 1.0], p / 'e.svg', 'mean score (%)'); "
            "plots.pitfall_counts(Counter({'x': 4}), p / 'q.svg'); print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    histogram = (tmp_path / "h.svg").read_text()
    assert histogram.startswith("<svg") and "0-10 %: 1 student(s)" in histogram and "90-100 %: 2 student(s)" in histogram
    rates = (tmp_path / "e.svg").read_text()
    assert "&lt;b&gt;" in rates and "<b>" not in rates and "01_softmax: 50%" in rates


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_report_with_an_exam_renders_in_chromium(records, tmp_path, course):
    exam, everything = _with_stub_and_exam(tmp_path, course, records)
    index = write_html_report(course, everything, tmp_path / "report")
    for page in (index, tmp_path / "report" / "students" / "alice.html"):
        render(page, tmp_path)


def test_feedback_hands_back_one_folder_or_zip_per_student(records, tmp_path, course):
    import zipfile

    from typer.testing import CliRunner

    from grader.cli import app

    exam, everything = _with_stub_and_exam(tmp_path, course, records)
    out = tmp_path / "handback"
    result = CliRunner().invoke(app, ["feedback", str(out), "--db", str(tmp_path / "grades.db")])
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in out.iterdir())
    assert {"alice", "bob", "carol", "dave"} <= set(folders) and not (out / ".build").exists()
    bob_page, bob_md = (out / "bob" / "index.html").read_text(), (out / "bob" / "feedback.md").read_text()
    hint = course.pitfall("softmax-overflow").hint
    assert hint.en in bob_page and hint.zh in bob_page and hint.en.split()[0] in bob_md
    assert "✗ failed · 未通过" in bob_md and "30 / 40" in bob_md and "../index.html" not in bob_page
    for folder in folders:   # nobody's folder names another student
        text = "".join(p.read_text() for p in (out / folder).iterdir())
        assert not [s for s in ("alice", "bob", "carol", "dave") if s != folder and s in text], folder
        assert LEAK not in text and "KEY-NEVER-SHOWN" not in text
    result = CliRunner().invoke(app, ["feedback", str(tmp_path / "zips"), "--db", str(tmp_path / "grades.db"), "--zip"])
    assert result.exit_code == 0 and "as zips" in result.output
    with zipfile.ZipFile(tmp_path / "zips" / "alice.zip") as zf:
        assert sorted(zf.namelist()) == ["alice/feedback.md", "alice/index.html"]
    result = CliRunner().invoke(app, ["feedback", str(tmp_path / "x"), "--db", str(tmp_path / "nope.db")])
    assert result.exit_code == 1 and "run `grader grade` first" in result.output


def test_class_report_lists_similar_submissions(records, tmp_path, course):
    """The section `grader grade` adds (grader/run/session.py: similarity_run.for_report)."""
    from grader.course import REPO_ROOT
    from grader.run.similarity import for_report

    subs = tmp_path / "class"
    original = (REPO_ROOT / "solutions" / "06_multihead" / "multihead.py").read_text()
    independent = (REPO_ROOT / "tests" / "similarity" / "independent_multihead.py").read_text()
    for student, source in [("alice", original), ("bob", original.replace("# ", "#  ")), ("carol", independent)]:
        (subs / student / "06_multihead").mkdir(parents=True)
        (subs / student / "06_multihead" / "multihead.py").write_text(source)
    similar = for_report(course, [course.exercise("06")], subs)
    assert similar[1] == "" and [(p.first, p.second) for p in similar[0][0].pairs] == [("alice", "bob")]
    html = write_html_report(course, records, tmp_path / "report", similarity=similar).read_text()
    section = html.split('id="similarity"')[1].split("</details>")[0]
    assert 'href="students/alice.html">alice</a> ~ <a href="students/bob.html">bob</a>' in section
    assert "carol" not in section and 'href="#similarity"' in html
    broken = for_report(course, [course.exercise("06")], tmp_path / "no-such-folder")
    assert broken[0] == [] and broken[1].startswith("similarity not computed")
    assert "similarity not computed" in write_html_report(course, records, tmp_path / "r2", similarity=broken).read_text()


def test_class_report_lists_the_first_similar_pairs_and_counts_the_rest(records, tmp_path, course):
    """A class of near-copies has thousands of pairs (300 sample students:
    14,706, a 4 MB page): the report lists REPORT_PAIRS, the most alike,
    and says how many more there are, read from the texts grading collected."""
    from grader.course import REPO_ROOT
    from grader.run.similarity import REPORT_PAIRS, for_report

    original = (REPO_ROOT / "solutions" / "06_multihead" / "multihead.py").read_text()
    students = [f"s{i:02d}" for i in range(20)]  # 190 pairs of one text
    similar = for_report(course, [course.exercise("06")], {"06": {s: original for s in students}})
    (report,) = similar[0]
    assert len(report.pairs) == REPORT_PAIRS < 190 and report.more == 190 - REPORT_PAIRS
    assert [(p.first, p.second) for p in report.pairs[:2]] == [("s00", "s01"), ("s00", "s02")]
    html = write_html_report(course, records, tmp_path / "report", similarity=similar).read_text()
    section = html.split('id="similarity"')[1].split("</details>")[0]
    assert section.count(" ~ ") == REPORT_PAIRS and f"and {190 - REPORT_PAIRS} more pair(s)" in section


def test_checks_that_could_not_tell_are_on_the_instructor_s_review_list(records, tmp_path, course):
    """Issue 36: a measured figure too near its threshold scores no points
    for now and is listed for the instructor, never a silent 0."""
    with Gradebook(tmp_path / "review.db") as book:
        reason = "could not tell whether the cache saves the work / 无法判断"
        book.record(Key("dave", "01", "h6", course.course.version), points=5, max_points=10, status="graded",
                    reason="", verdicts=[_verdict("01-a", True, 5, 5),
                                         _verdict("01-b", False, 0, 5, kind="could not tell", reason=reason)])
        review = list(book.records(course.course.version))
    write_html_report(course, records + review, tmp_path / "report")
    index = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    section = index.split('id="review"', 1)[1].split("</details>", 1)[0]
    assert "dave" in section and "01-b" in section and "could not tell whether the cache" in section
    assert "bob" not in section and "carol" not in section
    assert reason.split(" / ")[0] in (tmp_path / "report" / "students" / "dave.html").read_text(encoding="utf-8")
