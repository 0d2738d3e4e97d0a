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
# Code, formulas, quoted English (the tests' failure messages) and an exam
# question's placeholders ({temperature}: filled with a number) are not prose.
CODE_OR_MATH = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|“[^”\n]*”|'[^'\n]*'|\{\w+\}", re.S)


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


def test_the_glossary_has_the_part_c_terms():
    terms = translated_terms()
    for english, chinese in {"KV cache": "KV 缓存", "prefill": "预填充", "temperature": "温度",
                             "weight tying": "权重共享", "left padding": "左侧填充", "gradient clipping": "梯度裁剪",
                             "validation set": "验证集", "position embedding": "位置嵌入",
                             "output layer": "输出层"}.items():
        assert terms.get(english) == chinese, english


# A line break inside a Chinese paragraph renders as a stray space.
_STRUCTURE = re.compile(r"^\s*(?:[-*+] |\d+\. |\||#|```|<!--|!\[|>)")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def hard_breaks(text: str) -> list[int]:
    """Lines of a Markdown text that go on, in the same paragraph or list
    item, on the next line, when either holds Chinese."""
    found, fence, lines = [], False, text.split("\n")
    for number, (line, following) in enumerate(zip(lines, lines[1:]), start=1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence or not line.strip() or not following.strip() or _STRUCTURE.match(following) \
                or _STRUCTURE.match(line) and not line.lstrip().startswith(("- ", "* ", "+ ")) and not line.lstrip()[:1].isdigit():
            continue
        if _CJK.search(line) or _CJK.search(following):
            found.append(number)
    return found


PART_C_CHINESE = sorted([*REPO_ROOT.glob("exercises/1[234]_*/README.zh.md"), *REPO_ROOT.glob("notes/*.zh.md")])


@pytest.mark.parametrize("path", PART_C_CHINESE, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_chinese_paragraphs_have_no_hard_line_breaks(path):
    assert hard_breaks(path.read_text(encoding="utf-8")) == []


def test_a_hard_line_break_is_found():
    assert hard_breaks("第一行\n第二行\n") == [1]
    assert hard_breaks("- 一项\n  接着\n") == [1]
    assert hard_breaks("第一段\n\n第二段\n| 表 |\n| 格 |\n") == []
