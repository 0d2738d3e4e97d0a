"""Hidden checks of exercise 02 on real sandboxed runs: a correct solution
written differently from the reference gets full marks, and a solution that
only works on one (n, d) sequence keeps the unbatched checks' points."""
import pytest

from grader.intake.submissions import assemble

ALTERNATIVE = '''\
import torch


def attention_scores(inputs):
    return torch.einsum("...id,...jd->...ij", inputs, inputs)


def attention_weights(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


def context_vectors(inputs):
    return torch.einsum("...ij,...jd->...id", attention_weights(attention_scores(inputs)), inputs)
'''

# Written for one (n, d) sequence only: torch.mm and a hard-coded softmax dim.
UNBATCHED_ONLY = '''\
import torch


def attention_scores(inputs):
    return torch.mm(inputs, inputs.t())


def attention_weights(scores):
    return torch.softmax(scores, dim=1)


def context_vectors(inputs):
    return torch.mm(attention_weights(attention_scores(inputs)), inputs)
'''


def _grade(judge, source: str, tmp_path):
    exercise = judge.course.exercise("02")
    folder = assemble(exercise, source.encode(), tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def test_a_correct_solution_written_differently_gets_full_marks(judge, tmp_path):
    result = _grade(judge, ALTERNATIVE, tmp_path)
    assert result.points == pytest.approx(10), [(v.check_id, v.reason) for v in result.verdicts if not v.passed]


def test_an_unbatched_only_solution_keeps_the_unbatched_points(judge, tmp_path):
    result = _grade(judge, UNBATCHED_ONLY, tmp_path)
    failed = {v.check_id for v in result.verdicts if not v.passed}
    assert failed == {"02-scores-batched", "02-weights-batched", "02-context-batched", "02-gradients"}
    assert 0 < result.points < 10
