"""The Chinese texts use the glossary's one term for each English term
(notes/glossary.md): a term the glossary translates does not appear in
English in Chinese prose, except in code, in formulas, in quoted English
(the tests' messages), or in brackets right after its Chinese term
("层归一化（LayerNorm）")."""
import re
from pathlib import Path

import pytest
import yaml

from grader.course import REPO_ROOT

GLOSSARY = REPO_ROOT / "notes" / "glossary.md"
# Code, formulas, and quoted English (the tests' failure messages) are not prose.
CODE_OR_MATH = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|“[^”\n]*”|'[^'\n]*'", re.S)


def translated_terms() -> dict[str, str]:
    """English term -> its Chinese term, for the rows that translate it."""
    terms = {}
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] in ("English", "") or set(cells[0]) <= {"-"}:
            continue
        english, chinese = re.sub(r"\s*\(.*?\)", "", cells[0]), cells[1]
        for variant in english.split(", "):
            if variant and variant not in chinese and re.search(r"[\u4e00-\u9fff]", chinese):
                terms[variant] = chinese
    return terms


def chinese_texts() -> dict[str, str]:
    texts = {str(p.relative_to(REPO_ROOT)): p.read_text(encoding="utf-8")
             for p in [*REPO_ROOT.glob("exercises/*/README.zh.md"), *REPO_ROOT.glob("notes/*.zh.md")]}
    course = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    texts.update({f"course.yaml hint {p['id']}": p["hint"]["zh"] for p in course["pitfalls"]})
    bank = yaml.safe_load((REPO_ROOT / "exams" / "questions.yaml").read_text(encoding="utf-8"))
    texts.update({f"questions.yaml {q['id']}": q["text"]["zh"] for q in bank["questions"]})
    return texts


def test_the_glossary_translates_the_terms_the_issue_named():
    terms = translated_terms()
    for english in ("LayerNorm", "Add & Norm", "teacher forcing", "stub", "part B", "contract"):
        assert english in terms, english


@pytest.mark.parametrize("name,text", sorted(chinese_texts().items()))
def test_chinese_prose_uses_the_glossarys_terms(name, text):
    prose = CODE_OR_MATH.sub(" ", text)
    found = []
    for english, chinese in translated_terms().items():
        # Followed by "(" or "[", or preceded by "." or "_", it is code written without backticks.
        for match in re.finditer(rf"(?<![A-Za-z_.]){re.escape(english)}(?![A-Za-z_(\[])", prose):
            if not prose[:match.start()].endswith(f"{chinese}（"):
                found.append(english)
    assert found == [], f"{name}: {sorted(set(found))} in Chinese prose; notes/glossary.md gives the Chinese term"
