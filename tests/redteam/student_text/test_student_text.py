"""Student text never reaches feedback (issue 13, class 4), end to end.

Every submission in attacks/ answers wrongly and tries to carry text (an
error's message, an exception class's name, ``__str__``/``__repr__``,
printed output, warnings, a crafted SyntaxError, a module ``__getattr__``,
forged result frames) into what a student gets back. One `grader grade` run
grades them all with a correct control; then each attack's marker
(``ZZLEAK<nn>``) must be absent from results.json, grades.csv, the student's
HTML page, the gradebook's student-facing fields and the Gradescope results
built from them, with one exception (issue 31): an error the submission
raises is replayed on an ungraded input of the same kind
(grader/own_errors.py), and that replay's message, bounded and escaped, is
told after its fixed phrase. Text there was made from an input that grades
nobody, so it carries nothing hidden; anywhere else the marker must not
appear. The instructor-only page may show it (escaped)."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml

from classrun import book_version
from grader.course import REPO_ROOT, load_course
from grader.gradebook import Gradebook
from grader.report.html import page_name
from grader.scale.gradescope import results_json
from redteam.corpus import assert_outcome, grade_folder

HERE = Path(__file__).parent
ATTACKS = sorted(p.name for p in (HERE / "attacks").iterdir() if p.is_dir())
EXPECTED = yaml.safe_load((HERE / "expected.yaml").read_text())
# Gradebook fields that reach students (results.json, pages, Gradescope, nbgrader).
STUDENT_FACING_VERDICT_FIELDS = ("check_id", "passed", "points", "max_points", "message", "reason", "pitfalls",
                                 "confirmed", "possible", "kind")


def _marker(name: str) -> str:
    return f"ZZLEAK{name[1:3]}"


# What precedes a replayed message (grader/own_errors.py), in either language.
REPLAY_PHRASES = ("on an ungraded input of that kind it says: ", "在同类、不计分的输入上，它的信息是：")


def _outside_replays(text: str, marker: str) -> list[int]:
    """Where ``marker`` occurs in ``text`` other than inside a replayed
    message (at most 200 characters after its phrase)."""
    found, start = [], 0
    while (i := text.find(marker, start)) >= 0:
        if not any(phrase in text[max(0, i - 260):i] for phrase in REPLAY_PHRASES):
            found.append(i)
        start = i + 1
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the corpus once: (results by student, the run's folder, the records by student)."""
    root = tmp_path_factory.mktemp("student-text")
    subs = root / "submissions"
    shutil.copytree(HERE / "attacks", subs)
    (subs / "control" / "01_softmax").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", subs / "control" / "01_softmax")
    by_key, _ = grade_folder(subs, root, "--timeout", "10")
    with Gradebook(root / "grades.db") as book:
        records = {r.key.student: r for r in book.records(book_version(root / "grades.db"))}
    return {student: r for (student, _), r in by_key.items()}, root, records


def test_every_attack_has_an_expected_outcome_and_a_marker():
    assert len(ATTACKS) >= 6 and sorted(EXPECTED) == ATTACKS
    for name in ATTACKS:
        assert _marker(name) in (HERE / "attacks" / name / "01_softmax" / "softmax.py").read_text()


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_gets_its_outcome_and_its_text_reaches_no_student(graded, name):
    by_student, root, records = graded
    assert_outcome(by_student[name], EXPECTED[name])
    marker = _marker(name)
    out = root / "out"
    student_page = out / "report" / "students" / f"{page_name(name)}.html"
    assert student_page.is_file()
    for path in (out / "results.json", out / "grades.csv", student_page):
        assert not _outside_replays(path.read_text(encoding="utf-8"), marker), path.name
    record = records[name]
    shown = [record.status, record.reason,
             *(str({k: v.get(k) for k in STUDENT_FACING_VERDICT_FIELDS}) for v in record.verdicts)]
    assert not [text for text in shown if _outside_replays(text, marker)]
    course = load_course()
    assert not _outside_replays(str(results_json(course, [record])), marker)


def test_no_marker_anywhere_a_student_looks(graded):
    _, root, _ = graded
    out = root / "out"
    for path in [out / "results.json", out / "grades.csv", *(out / "report" / "students").glob("*.html")]:
        assert not _outside_replays(path.read_text(encoding="utf-8"), "ZZLEAK"), path.name
    rows = list(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    assert {row["student"] for row in rows} == {*ATTACKS, "control"}


def test_the_instructor_can_still_read_the_raw_error(graded):
    _, root, records = graded
    # Kept in a field of its own, and shown on the instructor's errors page, escaped.
    assert any("ZZLEAK03" in v.get("instructor_detail", "") for v in records["t03-exception-str-and-repr-carry-data"].verdicts)
    assert "ZZLEAK03" in (root / "out" / "report" / "errors.html").read_text(encoding="utf-8")


def test_the_control_gets_full_marks(graded):
    by_student, _, _ = graded
    assert by_student["control"]["points"] == 10 and by_student["control"]["status"] == "graded"
