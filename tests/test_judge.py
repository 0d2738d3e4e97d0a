"""The judge on real sandboxed runs: verdicts come from comparing plain data
with the reference, stubs get no hints, pitfalls are confirmed by variants,
and the grader refuses to grade without filesystem isolation."""
import pytest

from grader.course import REPO_ROOT
from grader.judge import GraderError, Judge
from grader.sandbox import Limits, Sandbox
from grader.submissions import assemble


@pytest.fixture(scope="module")
def sandbox(course):
    with Sandbox(Limits(**course.grading.model_dump())) as box:
        yield box


def _grade(judge, exercise, source: str, tmp_path):
    folder = assemble(exercise, source.encode(), tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def test_untouched_stub_scores_zero_without_hints(course, sandbox, tmp_path):
    exercise = course.exercise("01")
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text()
    result = _grade(Judge(course, sandbox), exercise, stub, tmp_path)
    assert result.points == 0 and result.status == "not_started"
    assert {v.reason for v in result.verdicts} <= {"not implemented yet", "counts once 01-random-shapes passes"}
    assert result.pitfalls == []


def test_a_variant_is_confirmed_as_its_own_pitfall(course, sandbox, tmp_path):
    from grader.pitfalls import load_variants

    exercise = course.exercise("01")
    variant = load_variants(exercise, REPO_ROOT)["softmax-overflow"]
    result = _grade(Judge(course, sandbox), exercise, variant.source, tmp_path)
    failed = [v for v in result.verdicts if not v.passed]
    assert 0 < result.points < exercise.points
    assert all(v.confirmed == ["softmax-overflow"] for v in failed), [(v.check_id, v.confirmed) for v in failed]


def test_a_correct_solution_written_differently_gets_full_marks(course, sandbox, tmp_path):
    source = (
        "import torch\n\n\n"
        "def softmax(x, dim=-1):\n"
        "    finite = torch.where(torch.isinf(x), torch.full_like(x, -1e30), x)\n"
        "    e = torch.exp(x - finite.max(dim=dim, keepdim=True).values)\n"
        "    s = e.sum(dim=dim, keepdim=True)\n"
        "    return torch.where(s > 0, e / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(e))\n"
    )
    result = _grade(Judge(course, sandbox), course.exercise("01"), source, tmp_path)
    assert result.points == pytest.approx(10), [(v.check_id, v.reason) for v in result.verdicts if not v.passed]


def test_messages_and_reasons_reveal_no_hidden_value(course, sandbox, tmp_path):
    source = "import torch\n\n\ndef softmax(x, dim=-1):\n    raise ValueError(f'shape {tuple(x.shape)} values {x.tolist()}')\n"
    result = _grade(Judge(course, sandbox), course.exercise("01"), source, tmp_path)
    shown = repr([{k: v for k, v in verdict.to_dict().items() if k != "instructor_detail"}
                  for verdict in result.verdicts])
    assert "shape (" not in shown and "values [" not in shown
    # The instructor may read the raw error; it lives in its own field only.
    assert any("values [" in v.instructor_detail for v in result.verdicts)
    assert {v.reason for v in result.verdicts if v.reason != "counts once 01-random-shapes passes"} == {"raised ValueError"}


def test_grading_without_filesystem_isolation_is_refused(course, monkeypatch):
    class Unconfined:
        def layers(self):
            return {"landlock": "missing: kernel too old", "filesystem_view": "missing: no mount namespace"}

    with pytest.raises(GraderError, match="cannot hide solutions"):
        Judge(course, Unconfined())


def test_a_module_that_cannot_be_imported_gets_its_reason_and_no_hints(course, sandbox, tmp_path):
    result = _grade(Judge(course, sandbox), course.exercise("01"), "def softmax(x, dim=-1)\n    return x\n", tmp_path)
    assert result.status == "import_error" and "syntax error on line 1" in result.reason
    assert result.points == 0 and result.pitfalls == []


def test_feedback_figures_come_from_public_inputs_only(course, sandbox, tmp_path):
    exercise = course.exercise("03")
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    result = _grade(Judge(course, sandbox), exercise, reference, tmp_path)
    figure = result.figures["causal-weights"]
    assert figure["student"] == figure["expected"] and len(figure["expected"]) == 6
    # Above the diagonal the causal weights are zero: a real picture, not noise.
    assert all(figure["expected"][i][j] == 0 for i in range(6) for j in range(i + 1, 6))
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text()
    assert _grade(Judge(course, sandbox), exercise, stub, tmp_path / "stub").figures["causal-weights"]["student"] is None
