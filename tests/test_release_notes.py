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


# "notes/01_attention.md) §3 (scaling), §4 (masks) and §7": each § after the file name.
SECTION_CITATION = re.compile(r"notes/(\w+)\.md\)?\s*((?:§\d+(?:-§\d+)?(?:\s*\([^)]*\))?(?:,\s*|\s+and\s+)?)+)")
ZH_SECTION_CITATION = re.compile(r"notes/(\w+)\.zh\.md\)?\s*((?:第\s*\d+\s*节(?:（[^）]*）)?[、和]?)+)")


def _cited_sections() -> list[tuple[str, str, int]]:
    """(where, note, section) for every "notes/NAME.md §N" and "notes/NAME.zh.md 第 N 节"."""
    files = [*REPO_ROOT.glob("exercises/*/README*.md"), *REPO_ROOT.glob("exercises/*/*.py"),
             *REPO_ROOT.glob("notes/*.md"), REPO_ROOT / "course.yaml", REPO_ROOT / "exams" / "questions.yaml"]
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in SECTION_CITATION.finditer(text):
            found += [(path.name, f"{match.group(1)}.md", int(n)) for n in re.findall(r"§(\d+)", match.group(2))]
        for match in ZH_SECTION_CITATION.finditer(text):
            found += [(path.name, f"{match.group(1)}.zh.md", int(n)) for n in re.findall(r"(\d+)", match.group(2))]
    return found


def test_every_cited_section_exists():
    cited = _cited_sections()
    assert len(cited) >= 20
    missing = []
    for where, note, section in cited:
        heading = f"## §{section} " if not note.endswith(".zh.md") else f"## 第 {section} 节"
        path = REPO_ROOT / "notes" / note
        if not path.is_file() or heading not in path.read_text(encoding="utf-8"):
            missing.append(f"{where}: {note} section {section}")
    assert missing == []
