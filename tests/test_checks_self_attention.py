"""Hidden checks of exercise 04 on real sandboxed runs: a correct solution
that creates its layers in another order and scales differently gets full
marks; a forward that folds the scale into a weight in place is caught by
the side-effect check, although its first call is right."""
import pytest

from grader.intake.submissions import assemble

ALTERNATIVE = '''\
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.d_k = d_out
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q = self.W_query(x) / math.sqrt(self.d_k)
        k, v = self.W_key(x), self.W_value(x)
        w = torch.softmax(torch.einsum("...id,...jd->...ij", q, k), dim=-1)
        return torch.einsum("...ij,...jd->...id", w, v)
'''

REFERENCE_FORWARD = "        queries = self.W_query(x)  # (..., n, d_out)\n"
# Scales W_query in place: right on the first call, wrong on every later one.
SCALE_IN_PLACE = (
    "        self.W_query.weight.data /= self.W_key.out_features ** 0.5\n"
    "        if self.W_query.bias is not None:\n"
    "            self.W_query.bias.data /= self.W_key.out_features ** 0.5\n"
    "        queries = self.W_query(x)\n"
)


def _grade(judge, source: str, tmp_path):
    exercise = judge.course.exercise("04")
    folder = assemble(exercise, source.encode(), tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def test_a_correct_solution_written_differently_gets_full_marks(judge, tmp_path):
    result = _grade(judge, ALTERNATIVE, tmp_path)
    assert result.points == pytest.approx(15), [(v.check_id, v.reason) for v in result.verdicts if not v.passed]


def test_a_forward_that_changes_its_weights_fails_the_side_effect_check(judge, tmp_path):
    from grader.course import REPO_ROOT

    exercise = judge.course.exercise("04")
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    scores_unscaled = reference.replace(REFERENCE_FORWARD, SCALE_IN_PLACE).replace(
        "scores / keys.size(-1) ** 0.5", "scores")
    assert scores_unscaled != reference
    result = _grade(judge, scores_unscaled, tmp_path)
    verdicts = {v.check_id: v for v in result.verdicts}
    assert not verdicts["04-no-side-effects"].passed
    assert verdicts["04-no-side-effects"].reason == "modified the module's weights"
    assert verdicts["04-unbatched"].passed  # every probe call that runs forward once is right
