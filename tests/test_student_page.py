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
from grader.checks import Check, CheckPlan, Figure, checks_for, figures_for, text
from grader.course import REPO_ROOT, load_course
from grader.gradebook import Key, Record
from grader.report.html import write_html_report
from grader.report.student_page import render_student_page
from grader.watch.feedback import graded_page
from grader.sandbox import ProbeCall
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


def _plan(exercise_id: str) -> CheckPlan:
    exercise = COURSE.exercise(exercise_id)
    return CheckPlan.build(checks_for(exercise), figures=figures_for(exercise))


@pytest.mark.parametrize("exercise_id, folder, module", [("12", "12_gpt", "gpt"), ("11", "11_transformer", "transformer")])
def test_the_figures_labels_fit_the_references_map(exercise_id, folder, module, tmp_path):
    plan = _plan(exercise_id)
    [(figure, index)] = plan.figures.values()
    value = run_probe(_reference(folder, module, tmp_path), plan.calls[index])
    found = value[figure.path[0]]
    queries, keys = figure.axes
    assert tuple(found.shape) == (len(queries), len(keys))
    assert abs(float(found.sum()) - len(queries)) < 1e-6  # rows of weights, each summing to 1


def test_the_judge_records_the_instructors_labels_with_the_numbers():
    """grader/figures.py ``run_figures``: the axes come from the Figure (trusted),
    the numbers from the runs; a student's run that failed records None."""
    import torch

    from grader.figures import run_figures
    from grader.sandbox.model import CallResult, RunResult

    [figure] = figures_for(COURSE.exercise("11"))
    plan = CheckPlan.build([_one_call_check("11-copy-task")], figures=[figure])
    reference = torch.tensor([[1.0, 0.0], [0.3, 0.7]])

    def ran(status: str, calls: list) -> RunResult:
        return RunResult(status=status, calls=calls, reason="", stdout="", stderr="", wall_s=0.0)

    expected = ran("ok", [CallResult(True, {"final_loss": 0.02, "cross_attention": reference})])
    for run, mine in ((ran("ok", [CallResult(True, {"cross_attention": reference * 0.5})]), (reference * 0.5).tolist()),
                      (ran("timeout", []), None),
                      (ran("ok", [CallResult(True, {"cross_attention": None})]), None),
                      (ran("ok", [CallResult(True, {"cross_attention": "<b>x</b>"})]), None)):
        found = run_figures(plan, run, expected)["copy-cross-attention"]
        assert found["student"] == mine and found["expected"] == reference.tolist()
        assert found["axes"] == [list(figure.axes[0]), list(figure.axes[1])]


# --- a figure drawn from a check's own call --------------------------------------------------------

def _one_call_check(check_id: str, n_calls: int = 1) -> Check:
    return Check(id=check_id, message=text("m", "m"), compare=lambda a, b: None,
                 calls=lambda gen: [ProbeCall("coursekit.probes.x:q", {"i": i}) for i in range(n_calls)])


def _figure(**how) -> Figure:
    return Figure(name="f", title=text("t", "t"), path=("map",), **how)


def test_exercise_11s_figure_reuses_the_copy_tasks_call():
    """No second training: the figure points at 11-copy-task's call, whose
    probe is asked for the figure's public source."""
    exercise = COURSE.exercise("11")
    plan, alone = _plan("11"), CheckPlan.build(checks_for(exercise))
    (figure, index), = plan.figures.values()
    assert len(plan.calls) == len(alone.calls)
    assert plan.slices["11-copy-task"] == slice(index, index + 1)
    call = plan.calls[index]
    assert call.probe == "coursekit.probes.copy_task:copy_outcome"
    assert [str(t) for t in call.kwargs["figure_source"]] == list(figure.axes[1])


def test_a_figure_with_its_own_call_comes_after_the_checks():
    plan = CheckPlan.build([_one_call_check("a", 2)], figures=[_figure(call=ProbeCall("coursekit.probes.x:fig", {}))])
    assert plan.figures["f"][1] == 2 and plan.calls[2].probe == "coursekit.probes.x:fig"


@pytest.mark.parametrize("how, error", [
    ({}, "either its own call or the check"),
    ({"call": ProbeCall("coursekit.probes.x:fig", {}), "check": "a"}, "either its own call or the check"),
])
def test_a_figure_has_exactly_one_source(how, error):
    with pytest.raises(ValueError, match=error):
        _figure(**how)


@pytest.mark.parametrize("checks, error", [
    ([_one_call_check("b")], "check 'a', which is not among"),
    ([_one_call_check("a", 2)], "makes 2 probe calls instead of one"),
    ([_one_call_check("a", 0)], "makes 0 probe calls instead of one"),
])
def test_a_figure_drawing_from_a_check_needs_that_checks_single_call(checks, error):
    with pytest.raises(ValueError, match=error):
        CheckPlan.build(checks, figures=[_figure(check="a")])


def test_grading_exercise_11_draws_the_copy_models_map_or_the_note(tmp_path):
    """End to end, in the sandbox: the reference's grade carries its own
    trained map beside the reference's (from 11-copy-task's call), the
    untouched stub's only the reference's, and the page says so."""
    from grader.intake.submissions import assemble
    from grader.judge import Judge
    from grader.sandbox import Limits, Sandbox

    exercise = COURSE.exercise("11")
    sources = {case: (REPO_ROOT / root / exercise.folder / exercise.module).read_text()
               for case, root in (("reference", "solutions"), ("stub", "exercises"))}
    with Sandbox(Limits(**COURSE.grading.model_dump())) as box:
        judge = Judge(COURSE, box)
        graded = {case: judge.grade(exercise, assemble(exercise, source.encode(), tmp_path / case / "s", COURSE),
                                    tmp_path / case / "work") for case, source in sources.items()}
    reference, stub = graded["reference"], graded["stub"]
    assert reference.points == exercise.points and stub.points == 0
    mine = reference.figures["copy-cross-attention"]
    assert mine["student"] == mine["expected"] and len(mine["student"]) == 7  # the same model, trained alike
    assert stub.figures["copy-cross-attention"]["student"] is None
    assert stub.figures["copy-cross-attention"]["expected"] == mine["expected"]
    for case, result in graded.items():
        record = Record(Key(case, "11", "h", COURSE.course.version), result.points, exercise.points, result.status,
                        "", [v.to_dict() for v in result.verdicts], 0.0, figures=result.figures)
        [svg] = _attention_svgs(render_student_page(COURSE, case, [exercise], {"11": record}, {"11": 0.5},
                                                    standalone=True))
        texts = " ".join("".join(t.itertext()) for t in svg.iter(f"{SVG}text"))
        assert ("reference's alone" in texts) is (case == "stub")


def test_every_change_after_grading_is_a_line_on_the_page_and_in_the_markdown():
    """Issue 34, item 1: a late or adjusted student saw a score whose checks did not add up to it."""
    import dataclasses

    from grader.report.handback import exercise_markdown

    exercise = COURSE.exercise("01")
    verdicts = [{"check_id": "01-values", "passed": True, "points": 10.0, "max_points": 10.0,
                 "message": {"en": "values", "zh": "值"}, "reason": "", "pitfalls": []}]
    graded = Record(Key("ana", "01", "h", COURSE.course.version), 10.0, 10.0, "graded", "", verdicts, 0.0)
    record = dataclasses.replace(
        graded, points=8.7, graded_points=10.0,
        adjustment={"kind": "points", "value": 9.5, "change": "= 9.5 +0.3", "reason": "<b>regrade</b> asked",
                    "by": "prof", "at": "2026-03-21T10:00:00+00:00"},
        lateness={"late_min": 120, "factor": 0.8878, "note": "120 min late", "unpenalised_points": 9.8,
                  "known": True, "flagged": True})
    html = render_student_page(COURSE, "ana", [exercise], {"01": record}, {})
    section = html[html.index('id="score-changes"'):]
    assert "graded by the checks" in section and "adjusted by the instructor (= 9.5 +0.3)" in section
    assert "-0.20" in section and "-1.10" in section and "score × 0.8878" in section
    assert "&lt;b&gt;regrade&lt;/b&gt; asked" in section and "<b>regrade</b>" not in html and "prof" in section
    markdown = exercise_markdown(COURSE, exercise, record)
    assert "Changes to your score" in markdown and "-0.20" in markdown and "-1.10" in markdown
    assert "&lt;b&gt;regrade" in markdown and "= 8.7 / 10" in markdown
    plain = render_student_page(COURSE, "ana", [exercise], {"01": graded}, {})
    assert 'id="score-changes"' not in plain and "Changes to your score" not in exercise_markdown(COURSE, exercise, graded)
