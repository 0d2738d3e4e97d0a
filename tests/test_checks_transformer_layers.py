"""Unit tests of exercise 08's hidden checks (no sandbox: `grader check 08`
proves the checks end to end)."""
import torch

from grader.checks import CheckPlan
from grader.checks.transformer_layers import CHECKS, _padding, _random_mask

MASK_SHAPES = {2, 3, 4}


def test_random_masks_keep_a_key_open_in_every_row():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        assert not _random_mask(gen, 2, 3, 4, 5).all(dim=-1).any()


def test_padding_masks_block_the_tail_and_can_block_everything():
    mask = _padding(torch.Generator().manual_seed(1), 3, 5, empty=1)
    assert mask.shape == (3, 1, 5) and mask[1].all() and not mask[0, 0, 0] and not mask[2, 0, 0]
    assert torch.equal(mask, mask.cummax(dim=-1).values)  # once blocked, blocked to the end


def test_checks_cover_every_mask_shape_and_known_pitfalls(course):
    assert len({c.id for c in CHECKS}) == len(CHECKS) and all(c.id.startswith("08-") for c in CHECKS)
    assert all(course.pitfall(p) for c in CHECKS for p in c.pitfalls)
    assert {p.id for p in course.exercise("08").pitfalls} <= {p for c in CHECKS for p in c.pitfalls}
    plan = CheckPlan.build(CHECKS)
    # Recorded calls (coursekit.probes.dispatch:recorded_call) carry the probe's kwargs inside.
    masks = [call.kwargs["kwargs"]["mask"] for call in plan.calls[plan.slices["08-masks"]]]
    assert {m.dim() for m in masks} == MASK_SHAPES
    assert any(m.dim() == 4 and m.shape[1] > 1 for m in masks)  # one mask per head
    assert all(m.dtype == torch.bool for m in masks)
