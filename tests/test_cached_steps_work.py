"""The timed cached steps of 14, 16 and 18 (grader/checks/work.py) give a
step no token that comes after it: each chunk is drawn from the logits the
step before returned (coursekit/probes/fed.py). A red-team
pass found that a step could read the tokens still to come through its
input's storage (a view of all of them) and run one full forward over them
at the first step, with no cache: 20/20 on 16. And the path must not be
guessable either, or a step could speculate it (as 14's generations could
with tied weights: tests/test_kv_cache_work.py). The same pass found that
18's timed model, with a window of 16, let a step recompute only the 31
tokens its logits depend on; its window is 256 now."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from coursekit.probes.fed import fed_steps
from grader.course import REPO_ROOT
from grader.intake.submissions import assemble

HERE = Path(__file__).parent / "cached_steps"
TIMED_STEPS = {"14": ["14-cache-cost", "14-chunks-cost", "14-padding-cost"], "16": ["16-cache-cost"],
               "18": ["18-cache-cost"]}


def test_each_chunk_is_made_from_the_last_and_has_its_own_storage():
    seen = []

    def step(new):
        seen.append((new.tolist(), new.untyped_storage().nbytes() // new.element_size()))
        return 1e3 * torch.nn.functional.one_hot((new + 1) % 5, 5).double()   # surely token + 1, noise or not

    logits = fed_steps(step, torch.tensor([[0, 1]]), 5)
    assert logits.shape == (1, 5, 5)
    assert seen == [([[0, 1]], 2), ([[1, 2]], 2), ([[2]], 1)]   # the last chunk cut to what remains


def _period(tokens: list[int]) -> int | None:
    return next((p for p in range(1, len(tokens) // 2 + 1)
                 if all(tokens[i] == tokens[i - p] for i in range(p, len(tokens)))), None)


@pytest.mark.parametrize("seed", [None, 11])
@pytest.mark.parametrize("exercise_id", sorted(TIMED_STEPS))
def test_the_fed_path_cannot_be_guessed(course, judge, exercise_id, seed, tmp_path):
    exercise = course.exercise(exercise_id)
    plan = judge.input_set(exercise, seed).plan
    run = judge.expected(exercise, tmp_path, seed)
    for check_id in TIMED_STEPS[exercise_id]:
        timed = [i for i in range(plan.slices[check_id].start, plan.slices[check_id].stop)
                 if plan.calls[i].probe.rsplit(":", 1)[1] in ("cost_steps", "cost_chunks", "cost_padded_steps")]
        assert len(timed) == 1, check_id
        path = run.calls[timed[0]].value["logits"].argmax(dim=-1).reshape(-1).tolist()
        assert len(path) >= 24 and len(set(path)) >= 8 and _period(path) is None, (check_id, path)


@pytest.mark.parametrize(("exercise_id", "attack"), [
    ("16", "rope_peeks_ahead.py"),   # reads the tokens ahead, one full forward over them at the first step
    ("18", "sliding_window_recomputes_the_receptive_field.py"),   # exact with the last L * (W - 1) + 1 tokens
])
def test_a_step_without_a_cache_gets_nothing_for_it(course, judge, exercise_id, attack, tmp_path):
    exercise = course.exercise(exercise_id)
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    source = (reference + "\n\n" + (HERE / attack).read_text()).encode()   # the reference with the attack appended
    result = judge.grade(exercise, assemble(exercise, source, tmp_path / "submission", course), tmp_path / "work")
    cost = next(v for v in result.verdicts if v.check_id == f"{exercise_id}-cache-cost")
    assert not cost.passed and "recomputed" in cost.reason, cost.reason


def test_a_drawn_token_depends_on_more_than_the_top_logit():
    # The top logit is always token 0's: a greedy feed would send 0 every time.
    drawn = []

    def step(new):
        drawn.append(new.item())
        return torch.tensor([[[1.0, 0.9] + [0.0] * 6]], dtype=torch.float64)

    fed_steps(step, torch.zeros(1, 1, dtype=torch.long), 32)
    assert len(set(drawn)) > 2, drawn
