"""Reports: CSV and JSON exports, the class and student pages, checked in a
real browser (headless Chromium: the page renders, no console error, every
image is there)."""
import csv
import json
import re

import pytest
from browser import CHROMIUM, render

from grader.gradebook import Gradebook, Key
from grader.report import svg, write_grades_csv, write_html_report, write_results_json


def _verdict(check_id, passed, points, max_points, pitfalls=(), confirmed=()):
    return {"check_id": check_id, "passed": passed, "points": points, "max_points": max_points,
            "message": {"en": f"what {check_id} checks", "zh": f"{check_id} 检查的内容"},
            "reason": "" if passed else "wrong values", "pitfalls": list(pitfalls), "confirmed": list(confirmed)}


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
                    reason="timed out after 60 s", verdicts=[_verdict("03-a", False, 0, 15)],
                    figures={"causal-weights": {"title": {"en": "weights on six words", "zh": "六个词上的权重"},
                                                "student": None, "expected": [[1.0, 0.0], [0.5, 0.5]]}})
        book.record(Key("<script>", "01", "h4", version), points=0, max_points=10, status="not_submitted",
                    reason="not submitted", verdicts=[_verdict("01-a", False, 0, 5), _verdict("01-b", False, 0, 5)])
        return list(book.records(version))


def test_csv_and_json_exports(records, tmp_path):
    write_grades_csv(records, tmp_path / "grades.csv")
    rows = list(csv.DictReader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert [(r["student"], r["exercise"], r["points"], r["status"]) for r in rows] == [
        ("<script>", "01", "0", "not_submitted"), ("alice", "01", "10", "graded"),
        ("bob", "01", "5", "graded"), ("bob", "03", "0", "timeout")]
    write_results_json(records, tmp_path / "results.json")
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    bob = next(r for r in data if r["student"] == "bob" and r["exercise"] == "01")
    assert bob["checks"][1] == {"id": "01-b", "passed": False, "points": 0, "max_points": 5,
                                "message": {"en": "what 01-b checks", "zh": "01-b 检查的内容"},
                                "reason": "wrong values", "pitfalls": ["softmax-overflow"]}


def test_pages_show_hints_and_escape_what_students_control(records, tmp_path, course):
    index = write_html_report(course, records, tmp_path / "report")
    bob = (tmp_path / "report" / "students" / "bob.html").read_text(encoding="utf-8")
    assert course.pitfall("softmax-overflow").hint.en in bob and course.pitfall("softmax-overflow").hint.zh in bob
    assert "matches this mistake exactly" in bob and "timed out after 60 s" in bob
    assert "weights on six words" in bob and "六个词上的权重" in bob
    assert bob.count('<svg class="heatmaps"') == 1 and "no result" in bob  # bob's 03 timed out: no weights of his
    assert '<svg class="chart"' in bob  # his scores next to the class mean
    assert "<script>" not in index.read_text(encoding="utf-8")  # a hostile student id is escaped
    for page in [index, *(tmp_path / "report" / "students").glob("*.html")]:
        for src in re.findall(r'src="([^"]+)"', page.read_text(encoding="utf-8")):
            assert (page.parent / src).is_file(), f"{page.name}: missing image {src}"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_pages_render_in_chromium_without_console_errors(records, tmp_path, course):
    index = write_html_report(course, records, tmp_path / "report")
    for page in (index, tmp_path / "report" / "students" / "bob.html"):
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
    assert result.exit_code == 0 and "3 students, 4 results" in result.output


def test_student_figures_are_inline_svg_on_the_expected_colour_scale():
    expected = [[0.0, 1.0], [0.5, 0.5]]
    drawn = str(svg.side_by_side([[1.0, float("nan")], [0.5, 0.5], [2.0, -1.0]], expected, "<b>weights</b>"))
    low, high = svg._hex(svg._VIRIDIS(0.0)), svg._hex(svg._VIRIDIS(1.0))
    cells = re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" fill="(#[0-9a-f]{6})"/>', drawn)
    # Yours (3 x 2, a NaN, values beyond the scale clipped), then expected (2 x 2), then the colour bar.
    assert cells[:6] == [high, svg.NO_VALUE, svg._hex(svg._VIRIDIS(0.5)), svg._hex(svg._VIRIDIS(0.5)), high, low]
    assert cells[6:10] == [low, high, svg._hex(svg._VIRIDIS(0.5)), svg._hex(svg._VIRIDIS(0.5))]
    assert "<title>&lt;b&gt;weights&lt;/b&gt;</title>" in drawn and "<b>" not in drawn
    bars = str(svg.score_bars(["01", "<02>"], [1.0, 0.25], [0.5, 0.5]))
    assert "01 you: 100%" in bars and "&lt;02&gt; class mean: 50%" in bars and "<02>" not in bars
