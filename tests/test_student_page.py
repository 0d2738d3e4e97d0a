"""The student's page (grader/report/student_page.py): one render for the
class report and for ``grader watch``; attention figures (exercises 11 and
12's ``FIGURES``) drawn with their fixed token labels beside the reference's."""
from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from coursekit.loader import load_module
from grader.checks import figures_for
from grader.course import REPO_ROOT, load_course
from grader.gradebook import Key, Record
from grader.report.html import write_html_report
from grader.report.student_page import render_student_page
from grader.watch.feedback import graded_page
from probecalls import run_probe

SVG = "{http://www.w3.org/2000/svg}"
COURSE = load_course(REPO_ROOT / "course.yaml")
REFERENCE = [[1.0, 0.0], [0.2, 0.8], [0.1, 0.9]]
AXES = [["<s>", "3", "4"], ["3", "4"]]


def _record(student_map, student: str = "alice") -> Record:
    figure = {"title": {"en": "cross-attention", "zh": "交叉注意力"}, "student": student_map,
              "expected": REFERENCE, "axes": AXES}
    verdicts = [{"check_id": "11-copy-task", "passed": False, "points": 0, "max_points": 1,
                 "message": {"en": "copies", "zh": "复制"}, "reason": "copies too few", "pitfalls": []}]
    return Record(Key(student, "11", "h", COURSE.course.version), 5.0, 10.0, "graded", "", verdicts, 0.0,
                  figures={"copy-cross-attention": figure})


def _attention_svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r'<svg class="attention".*?</svg>', html, flags=re.S)]


def _weights(root: ET.Element) -> list[float]:
    return [float(r.get("data-weight")) for r in root.iter(f"{SVG}rect") if r.get("data-weight")]


def test_an_attention_figure_is_drawn_with_its_labels_beside_the_reference():
    mine = [[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]]
    html = render_student_page(COURSE, "alice", [COURSE.exercise("11")], {"11": _record(mine)}, {"11": 0.5})
    [figure] = _attention_svgs(html)
    assert _weights(figure) == [v for m in (mine, REFERENCE) for row in m for v in row]
    texts = ["".join(t.itertext()) for t in figure.iter(f"{SVG}text")]
    assert texts.count("<s>") == 2 and "&lt;s&gt;" in html  # escaped in the markup, shown as the token
    assert "alone" not in " ".join("".join(t.itertext()) for t in figure.iter(f"{SVG}text"))


@pytest.mark.parametrize("mine", [None, [[float("nan"), 1.0], [0.5, 0.5], [0.5, 0.5]], [[1.0]]])
def test_a_model_that_gave_no_usable_map_gets_the_reference_alone_with_a_note(mine):
    html = render_student_page(COURSE, "alice", [COURSE.exercise("11")], {"11": _record(mine)}, {})
    [figure] = _attention_svgs(html)
    assert _weights(figure) == [v for row in REFERENCE for v in row]
    texts = " ".join("".join(t.itertext()) for t in figure.iter(f"{SVG}text"))
    assert "reference's alone" in texts and "只显示参考实现的" in texts


def test_the_class_report_and_grader_watch_render_the_same_page(tmp_path):
    exercises = [COURSE.exercise("11")]
    rows = {"11": _record([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])}
    write_html_report(COURSE, list(rows.values()), tmp_path, students_only=["alice"])
    from_report = (tmp_path / "students" / "alice.html").read_text(encoding="utf-8")
    expected = render_student_page(COURSE, "alice", exercises, rows, {"11": 0.5}, standalone=True)
    assert from_report == expected
    from_watch = graded_page(COURSE, "alice", exercises, rows, {"11": 0.5}, note="graded at noon")
    assert from_watch.replace('<p class="sub">graded at noon</p>\n', "", 1) == expected


def _reference(folder: str, module: str, tmp_path: Path):
    shutil.copytree(REPO_ROOT / "exercises" / folder, tmp_path / folder)
    shutil.copy(REPO_ROOT / "solutions" / folder / f"{module}.py", tmp_path / folder / f"{module}.py")
    return load_module(tmp_path / folder, module)


@pytest.mark.parametrize("exercise_id, folder, module", [("12", "12_gpt", "gpt"), ("11", "11_transformer", "transformer")])
def test_the_figures_labels_fit_the_references_map(exercise_id, folder, module, tmp_path):
    [figure] = figures_for(COURSE.exercise(exercise_id))
    value = run_probe(_reference(folder, module, tmp_path), figure.call)
    found = value[figure.path[0]]
    queries, keys = figure.axes
    assert tuple(found.shape) == (len(queries), len(keys))
    assert abs(float(found.sum()) - len(queries)) < 1e-6  # rows of weights, each summing to 1


def test_the_judge_records_the_instructors_labels_with_the_numbers():
    """grader/judge.py ``_figures``: the axes come from the Figure (trusted),
    the numbers from the runs; a student's run that failed records None."""
    import torch

    from grader.checks import CheckPlan
    from grader.judge import _figures
    from grader.sandbox.model import CallResult, RunResult

    [figure] = figures_for(COURSE.exercise("11"))
    plan = CheckPlan.build([], figures=[figure])
    reference = torch.tensor([[1.0, 0.0], [0.3, 0.7]])

    def ran(status: str, calls: list) -> RunResult:
        return RunResult(status=status, calls=calls, reason="", stdout="", stderr="", wall_s=0.0)

    expected = ran("ok", [CallResult(True, {"cross_attention": reference})])
    for run, mine in ((ran("ok", [CallResult(True, {"cross_attention": reference * 0.5})]), (reference * 0.5).tolist()),
                      (ran("timeout", []), None),
                      (ran("ok", [CallResult(True, {"cross_attention": "<b>x</b>"})]), None)):
        found = _figures(plan, run, expected)["copy-cross-attention"]
        assert found["student"] == mine and found["expected"] == reference.tolist()
        assert found["axes"] == [list(figure.axes[0]), list(figure.axes[1])]
