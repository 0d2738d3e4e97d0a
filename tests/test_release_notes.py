"""The students' repository ships the course's notes, which the READMEs,
hints and exam questions cite, and the notes leak nothing."""
import re

import pytest

from grader.course import REPO_ROOT, load_course
from grader.release.student_repo import find_leaks, write_student_repo

CITATION = re.compile(r"notes/([\w.]+\.md)")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")
    course = load_course(check_files=False)
    out = tmp_path_factory.mktemp("student-repo")
    write_student_repo(course, REPO_ROOT, out)
    return course, out


def test_the_notes_are_released_and_leak_nothing(released):
    course, out = released
    shipped = {p.name for p in (out / "notes").iterdir()}
    assert {p.name for p in (REPO_ROOT / "notes").glob("*.md")} == shipped
    assert find_leaks(out, course, REPO_ROOT) == []
    assert "notes/" in (out / "README.md").read_text(encoding="utf-8")


def test_every_cited_note_is_released(released):
    _, out = released
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".yaml"}]
    cited = {name for text in texts for name in CITATION.findall(text)}
    assert cited, "no citation of the notes found in the released tree"
    assert cited <= {p.name for p in (out / "notes").iterdir()}, cited
