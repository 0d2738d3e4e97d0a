"""The pages people read, mail and upload, opened in a real browser (issue 34):
the class report, a student's page, the page ``grader watch`` hands back
and an exam's report. Each page is copied alone into an empty folder and
opened offline: it must need nothing beside it (no ``img/``), log no console
error, ask for no resource it cannot have, reach every section from its
contents, draw every figure with a size, and be photographed at a phone's
and a desktop's width.

Playwright drives Debian's Chromium through ``executable_path``: no browser
is downloaded. Skipped, with the install command, where either is missing.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from grader.cli import app
from grader.gradebook import Gradebook, Key
from grader.report.html import write_html_report
from grader.watch.feedback import graded_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install -e '.[dev]'")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed: apt-get install chromium "
                                "(.ci/run installs it)")
WIDTHS = {"phone": 390, "desktop": 1280}
EXAM_SECRET = "browser-test-secret-0123456789abcdef"


def _verdict(check_id: str, passed: bool, points: float, max_points: float) -> dict:
    return {"check_id": check_id, "passed": passed, "points": points, "max_points": max_points,
            "message": {"en": f"the {check_id} check", "zh": f"检查 {check_id}"},
            "reason": "" if passed else "wrong values", "pitfalls": []}


def _class_records(course, db: Path) -> list:
    """ana: full marks, adjusted and late; ben: one check failed, with a heat map."""
    version = course.course.version
    figure = {"title": {"en": "weights", "zh": "权重"}, "student": [[0.5, 0.5], [0.1, 0.9]],
              "expected": [[0.6, 0.4], [0.2, 0.8]]}
    with Gradebook(db) as book:
        book.record(Key("ana", "01", "h1", version), points=10, max_points=10, status="graded", reason="",
                    verdicts=[_verdict("01-a", True, 5, 5), _verdict("01-b", True, 5, 5)])
        book.record(Key("ben", "01", "h2", version), points=5, max_points=10, status="graded", reason="",
                    verdicts=[_verdict("01-a", True, 5, 5), _verdict("01-b", False, 0, 5)],
                    figures={"weights": figure})
        book.adjust("ana", "01", kind="delta", value=-1.0, reason="copied a helper", made_by="prof",
                    course_version=version, content_hash="h1")
        book.set_lateness({Key("ana", "01", "h1", version): {
            "submitted_at": None, "deadline": None, "source": "timestamps", "late_min": 120.0, "flagged": True,
            "factor": 0.88, "note": "120 min late", "known": True}})
        return list(book.records(version))


def _exam_report(tmp_path: Path, monkeypatch) -> Path:
    """``grader exam grade --answers-only`` of one student's answers: its report.html."""
    monkeypatch.setenv("GRADER_EXAM_SECRET", EXAM_SECRET)
    runner = CliRunner()
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "roster.csv").write_text("student_id\nabc\n")
    variant = json.loads(runner.invoke(app, ["exam", "variant", "midterm", "abc", "--json"]).output)
    assert runner.invoke(app, ["exam", "build", "midterm", "--roster", str(tmp_path / "roster.csv"),
                               "--out", str(tmp_path / "built")]).exit_code == 0
    shutil.copytree(tmp_path / "built" / "abc", tmp_path / "subs" / "abc")
    answers = {q: a for q, a in variant["answers"].items() if "|" not in a and "," not in a}
    (tmp_path / "subs" / "abc" / "answers.yaml").write_text(yaml.safe_dump(answers))
    result = runner.invoke(app, ["exam", "grade", "midterm", str(tmp_path / "subs"), "--answers-only", "--out",
                                 str(tmp_path / "graded"), "--roster", str(tmp_path / "roster.csv"),
                                 "--db", str(tmp_path / "exam.db")])
    assert result.exit_code == 0, result.output
    return tmp_path / "graded" / "report.html"


@pytest.fixture(scope="module")
def pages(course, tmp_path_factory) -> dict[str, Path]:
    """Each page alone in a folder of its own: nothing it could load from beside it."""
    work = tmp_path_factory.mktemp("pages")
    records = _class_records(course, work / "grades.db")
    index = write_html_report(course, records, work / "report")
    rows = {r.key.exercise: r for r in records if r.key.student == "ana"}
    watch = work / "watch.html"
    watch.write_text(graded_page(course, "ana", [course.exercise("01")], rows, {"01": 0.75},
                                 "graded 2026-03-21 10:00 UTC"), encoding="utf-8")
    with pytest.MonkeyPatch.context() as monkeypatch:
        exam = _exam_report(work / "exam", monkeypatch)
    found = {"class report": index, "student page": work / "report" / "students" / "ana.html",
             "watch feedback": watch, "exam report": exam}
    alone = {}
    for name, page in found.items():
        folder = work / "alone" / name.replace(" ", "-")
        folder.mkdir(parents=True)
        alone[name] = Path(shutil.copy(page, folder / page.name))
    return alone


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def _open(browser, path: Path, width: int):
    """The page at ``width`` offline, with what it logged and asked for."""
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    page = context.new_page()
    seen = {"errors": [], "failed": [], "requests": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("requestfailed", lambda r: seen["failed"].append(r.url))
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.goto(path.as_uri(), wait_until="load")
    return context, page, seen


@pytest.mark.parametrize("name", ["class report", "student page", "watch feedback", "exam report"])
@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_a_page_alone_renders_offline_with_every_section_and_figure(browser, pages, name, width, tmp_path):
    context, page, seen = _open(browser, pages[name], WIDTHS[width])
    try:
        assert not seen["errors"] and not seen["failed"], seen
        outside = [u for u in seen["requests"] if not u.startswith("data:") and u != pages[name].as_uri()]
        assert not outside, f"{name} asks for resources beside it: {outside}"
        assert page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
        sizes = page.eval_on_selector_all("img, svg", "els => els.map(e => [e.getBoundingClientRect().width, "
                                                      "e.getBoundingClientRect().height])")
        assert all(w > 0 and h > 0 for w, h in sizes), sizes
        # The contents reach every section, and each link lands on its section.
        links = page.eval_on_selector_all("nav a[href^='#']", "els => els.map(e => e.getAttribute('href'))")
        sections = page.eval_on_selector_all("details[id], section[id]", "els => els.map(e => '#' + e.id)")
        assert set(sections) <= set(links), f"sections without a link: {set(sections) - set(links)}"
        for link in links:
            page.click(f"nav a[href='{link}']")
            top = page.evaluate(f"document.querySelector({json.dumps(link)}).getBoundingClientRect().top")
            assert -2 <= top < WIDTHS[width] * 3, (link, top)
        shot = tmp_path / f"{name.replace(' ', '-')}-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        context.close()


def test_the_class_report_has_its_figures_inline(pages):
    html = pages["class report"].read_text(encoding="utf-8")
    assert 'src="data:image/svg+xml;base64,' in html and 'src="img/' not in html


def test_the_student_page_shows_each_change_to_the_score(browser, pages):
    context, page, _ = _open(browser, pages["student page"], WIDTHS["desktop"])
    try:
        text = page.inner_text("#score-changes + table")
        assert "adjusted by the instructor" in text and "copied a helper" in text and "late: 120 min" in text
        assert page.is_visible("#score-changes")
    finally:
        context.close()


def test_pages_records_keep_their_parts(course, tmp_path):
    """The fixture's numbers, so the browser tests above see a late and adjusted score."""
    [ana] = [r for r in _class_records(course, tmp_path / "g.db") if r.key.student == "ana"]
    assert dataclasses.asdict(ana)["points"] == pytest.approx((10 - 1) * 0.88)
