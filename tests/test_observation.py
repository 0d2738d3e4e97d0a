"""What the checks observe, graded end to end (issue 14): submissions in
tests/observation/, each graded by the judge in the sandbox like a student's.

- dropout is seen at the dispatcher: a correct 06 that imports
  ``dropout`` by name gets full marks;
- a structural fact accepts every structure the README allows: a correct 11
  that loops over ``self.encoder.layers`` gets full marks;
- device placement is checked by a forward pass on the meta device: a fresh
  CPU mask in 05 loses the device check, and only it;
- a shape error is a shape error, not a device failure (11);
- large scores: a softmax without max subtraction loses 08's check;
- contract attributes exist from ``__init__`` (08's ``attn``).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.judge import ExerciseResult, Judge
from grader.intake.submissions import assemble

SUBMISSIONS = Path(__file__).parent / "observation"


def _grade(judge: Judge, exercise_id: str, name: str, tmp_path: Path) -> ExerciseResult:
    exercise = judge.course.exercise(exercise_id)
    source = (SUBMISSIONS / name).read_bytes()
    folder = assemble(exercise, source, tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def _confirmed(result: ExerciseResult) -> set[str]:
    return {p for v in result.verdicts for p in v.confirmed}


def _failed(result: ExerciseResult) -> dict[str, tuple[str, list[str]]]:
    return {v.check_id: (v.reason, v.pitfalls) for v in result.verdicts if not v.passed}


@pytest.mark.parametrize("exercise_id,name", [
    ("06", "aliased_dropout_06.py"),
    ("11", "loop_over_layers_11.py"),
], ids=["06-dropout-imported-by-name", "11-loop-over-the-stacks-layers"])
def test_correct_submissions_written_otherwise_get_full_marks(judge, tmp_path, exercise_id, name):
    result = _grade(judge, exercise_id, name, tmp_path)
    assert result.status == "graded" and not _failed(result), _failed(result)
    assert result.points == pytest.approx(result.max_points)


def test_a_fresh_cpu_mask_in_forward_fails_the_device_check_only(judge, tmp_path):
    result = _grade(judge, "05", "fresh_cpu_mask_05.py", tmp_path)
    failed = _failed(result)
    assert set(failed) == {"05-forward-device"}, failed
    reason, hints = failed["05-forward-device"]
    assert "another device" in reason and hints == ["mask-cpu-loop"], failed
    # Not the variant whose mask is a plain attribute: the buffer is registered here, and that
    # variant fails the buffer checks this submission passes, so it is not even offered.
    assert "mask-not-buffer" not in hints


def test_a_softmax_without_max_subtraction_fails_the_large_scores_check_only(judge, tmp_path):
    failed = _failed(_grade(judge, "08", "softmax_no_max_08.py", tmp_path))
    assert set(failed) == {"08-large-scores"}, failed
    assert "NaN" in failed["08-large-scores"][0] and "softmax-overflow" in failed["08-large-scores"][1]


def test_attn_must_exist_before_the_first_forward(judge, tmp_path):
    # One submission for both suites: the accuracy corpus's (it holds the label).
    failed = _failed(_grade(judge, "08", "../accuracy/08/bug_attn_not_in_init.py", tmp_path))
    assert set(failed) == {"08-attn-before-forward"}, failed
    assert "__init__" in failed["08-attn-before-forward"][0]


def test_a_shape_error_on_the_meta_device_is_no_device_failure(judge, tmp_path):
    failed = _failed(_grade(judge, "11", "shape_error_11.py", tmp_path))
    reason, hints = failed["11-device"]
    # The failure is named by its kind (a shape error, in fixed words), never as a device failure.
    assert reason.startswith("a shape error") and "mask-cpu-loop" not in hints, failed["11-device"]
    assert not any("another device" in why for why, _ in failed.values())


# --- the probes themselves, in-process ------------------------------------------------

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.functional import dropout as dropout_by_name  # noqa: E402

from coursekit.probes.dropout import DropoutWatch, FixedDropout, canonical_keep  # noqa: E402
from coursekit.probes.placement import placement  # noqa: E402
from grader.checks.devices import placement_agrees  # noqa: E402


@pytest.mark.parametrize("call", [
    lambda x: nn.functional.dropout(x, 0.3, True),
    lambda x: dropout_by_name(x, 0.3, True),
    lambda x: torch.dropout(x, 0.3, True),
    lambda x: torch.dropout_(x.clone(), 0.3, True),
    lambda x: torch.native_dropout(x, 0.3, True)[0],
    lambda x: nn.Dropout(0.3)(x),
], ids=["F.dropout", "imported-by-name", "torch.dropout", "torch.dropout_", "native_dropout", "nn.Dropout"])
def test_every_way_of_calling_dropout_draws_the_same_fixed_mask(call):
    x = torch.rand(4, 5) + 1
    with FixedDropout(3) as fixed:
        got = call(x)
    with FixedDropout(3):
        expected = nn.Dropout(0.3)(x)
    assert fixed.shapes == [[4, 5]] and torch.equal(got, expected)
    # The mask follows the logical order, not the memory layout.
    with FixedDropout(3):
        transposed = dropout_by_name(x.t().contiguous().t(), 0.3, True)
    assert torch.equal(transposed, expected)


def test_fixed_dropout_drops_the_same_attention_entries_however_the_heads_are_called():
    """One call on (b, h, n, n), one call per head on (b, n, n), a reshaped
    (b * h, n, n) and a keys-first (b, h, n, n) transposed back all drop the
    same (query, key) entries, and so do both layouts of cross attention."""
    weights = torch.rand(2, 3, 5, 5) + 1
    with FixedDropout(7):
        whole = nn.Dropout(0.4)(weights)
    with FixedDropout(7) as fixed:
        per_head = torch.stack([dropout_by_name(weights[:, i], 0.4, True) for i in range(3)], dim=1)
        flat = torch.dropout(weights.reshape(6, 5, 5), 0.4, True).reshape(2, 3, 5, 5)
        keys_first = nn.functional.dropout(weights.transpose(-1, -2), 0.4).transpose(-1, -2)
    assert fixed.shapes == [[2, 5, 5]] * 3 + [[6, 5, 5], [2, 3, 5, 5]]
    assert torch.equal(per_head, whole) and torch.equal(flat, whole) and torch.equal(keys_first, whole)
    assert not torch.equal(whole == 0, torch.zeros_like(whole, dtype=torch.bool))  # it does drop
    cross = torch.rand(2, 4, 6) + 1  # cross attention: queries and keys of different lengths
    with FixedDropout(7):
        rows_first = nn.Dropout(0.5)(cross)
        cols_first = nn.Dropout(0.5)(cross.transpose(1, 2)).transpose(1, 2)
    assert torch.equal(rows_first, cols_first)
    assert not torch.equal(canonical_keep(7, (4, 6), 0.5), canonical_keep(8, (4, 6), 0.5))


def test_dropout_watch_sees_every_call_and_can_switch_some_off():
    x = torch.rand(3, 3) + 1
    with DropoutWatch() as watch:
        dropout_by_name(x, 0.5, True)
        nn.Dropout(0.5).eval()(x)
    assert len(watch.inputs) == 2 and torch.equal(watch.outputs[1], x)
    with DropoutWatch(only_when=lambda: False):
        assert torch.equal(torch.dropout(x, 0.9, True), x)


class _Attention(nn.Module):
    """A tiny causal attention whose mask comes from ``make_mask(n, x)``."""

    def __init__(self, make_mask, fill: str = "masked_fill"):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.make_mask, self.fill = make_mask, fill

    def forward(self, x):
        scores = self.proj(x) @ x.transpose(-2, -1)
        mask = self.make_mask(x.size(1), x)
        if self.fill == "matmul":  # a CPU tensor meeting the scores in a matmul: no meta kernel checks it
            return torch.softmax(scores, -1) @ mask
        scores = scores.masked_fill_(mask, float("-inf")) if self.fill == "in-place" else scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, -1) / torch.tensor(2.0)  # a 0-dim CPU tensor is fine on any device


def _causal_on(n, x):
    return torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)


@pytest.mark.parametrize("make_mask,fill,expected", [
    (_causal_on, "masked_fill", "ok"),
    (lambda n, x: torch.ones(n, n, dtype=torch.bool).triu(1), "masked_fill", "mismatch"),
    (lambda n, x: torch.ones(n, n, dtype=torch.bool).triu(1), "in-place", "mismatch"),
    (lambda n, x: torch.ones(n, n).triu(1), "matmul", "mismatch"),
    (lambda n, x: torch.ones(n, n).triu(1).bool().to(x.device), "masked_fill", "ok"),
    (lambda n, x: torch.ones(n, n).triu(1).type_as(x).bool(), "masked_fill", "ok"),
    (lambda n, x: _causal_on(n, x) if bool(x.sum() > -1e9) else None, "masked_fill", "unchecked"),
], ids=["on-the-inputs-device", "fresh-cpu-mask", "in-place-fill", "cpu-matmul", "moved-to-device", "type-as-input",
        "reads-values"])
def test_placement_sees_cpu_tensors_however_they_are_used(make_mask, fill, expected):
    found = placement(lambda: _Attention(make_mask, fill), (torch.randn(2, 3, 4),))
    assert found["placement"] == expected, found
    assert found["shape"] == [2, 3, 3]


def test_a_shape_error_is_raised_on_the_cpu_not_called_a_device_problem():
    with pytest.raises(RuntimeError, match="size of tensor"):
        placement(lambda: _Attention(lambda n, x: torch.ones(n, n + 1, dtype=torch.bool, device=x.device)),
                  (torch.randn(2, 3, 4),))


def test_unchecked_counts_as_placed_and_a_mismatch_as_a_device_failure():
    ok, unchecked, mismatch = ({"placement": p, "shape": [2]} for p in ("ok", "unchecked", "mismatch"))
    assert placement_agrees(unchecked, ok) is None and placement_agrees(mismatch, mismatch) is None
    assert "another device" in placement_agrees(mismatch, ok)
    assert placement_agrees({"placement": "ok", "shape": [3]}, ok) == "wrong shape"
    # A mask kept as a plain attribute (left behind by .to()) and a mask made
    # on the CPU in forward are different mistakes: a variant of one does not
    # confirm the other.
    plain_attribute = {**mismatch, "left_behind": ["mask"]}
    assert placement_agrees(mismatch, plain_attribute) is not None
    assert placement_agrees(plain_attribute, plain_attribute) is None


def test_the_causal_figure_shows_a_minus_1e9_mask(course, tmp_path):
    """03's figure has a fully blocked row, where -1e9 gives uniform weights
    instead of zeros; on a plain causal mask both would look the same."""
    from coursekit.loader import load_module
    from grader.checks.masking import FIGURES
    from grader.course import REPO_ROOT
    from grader.course.pitfalls import load_variants
    from probecalls import run_probe

    exercise = course.exercise("03")
    variant = load_variants(exercise, REPO_ROOT)["mask-minus-1e9"]
    (tmp_path / exercise.module).write_text(variant.source, encoding="utf-8")
    student = load_module(tmp_path, exercise.module)
    reference = load_module(REPO_ROOT / "solutions" / exercise.folder, exercise.module)
    call = FIGURES[0].call
    drawn = {name: run_probe(module, call)["weights"] for name, module in (("student", student), ("reference", reference))}
    assert bool(call.kwargs["mask"].all(dim=-1).any())  # a fully blocked row
    assert not torch.allclose(drawn["student"], drawn["reference"])
    causal = {**call.kwargs, "mask": torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)}
    plain = [run_probe(m, type(call)(call.probe, causal))["weights"] for m in (student, reference)]
    assert torch.allclose(*plain)
