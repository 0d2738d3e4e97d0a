"""The hidden checks of exercise 16, run in-process (no sandbox): correct
solutions written unlike the reference (LLaMA's complex numbers, a looked-up
angle table) pass every check, mistakes the variants do not cover fail
where they should, the hidden inputs cover what the checks claim, and the
reference's cached logits are its full forward's at every step. ``grader
check 16`` covers the reference, the stub and the pitfall variants through
the sandbox (the cost check measures CPU time there: it is left out here)."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.probes import rope as probes
from grader.checks import CheckPlan
from grader.checks import rope as checks
from grader.course import REPO_ROOT, load_course
from grader.course.pitfalls import Edit, apply_edits
from probecalls import all_pass, exercise_module, plan_values, same

REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "16_rope" / "rope.py").read_text()
PLAN = CheckPlan.build(checks.CHECKS)
VALUE_CHECKS = [c for c in checks.CHECKS if not c.measured and c.run_rule is None]

ROTATION = '''    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]                 # (b, h, n, hd/2) each
    # The 2x2 rotation [[cos, -sin], [sin, cos]] applied to (even, odd).
    rotated_even = even * cos - odd * sin
    rotated_odd = even * sin + odd * cos
    # Interleave back: (..., hd/2, 2) -> (..., hd), pair k at columns 2k, 2k+1.
    return torch.stack([rotated_even, rotated_odd], dim=-1).flatten(-2)
'''
# Correct in other words: each must pass every check.
STYLES = {
    # Meta's LLaMA: pairs as complex numbers, multiplied by e^(i * angle).
    "complex": [Edit(ROTATION, '''    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).flatten(-2)
''')],
    # The table of rope_angles, looked up by position (CS336's buffers).
    "table": [Edit(ROTATION, '''    cos, sin = rope_angles(int(positions.max()) + 1, x.size(-1), base, dtype=x.dtype)
    cos, sin = cos[positions], sin[positions]
    if cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
    out = torch.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out
''')],
    # Positions counted from the padded row's start at every step: RoPE sees
    # i - j only and padding is never attended to, so the logits are the same.
    "row-start-positions": [Edit("positions = ((~pad_mask).long().cumsum(-1) - 1).clamp_min(0)[:, start:]",
                                 "positions = torch.arange(start, total, device=idx.device)")],
}
# Wrong, and not a variant: (source edits, the checks that must fail).
MISTAKES = {
    # Turning the other way: scores still depend on i - j only, norms are
    # kept, but every value is another one.
    "clockwise": ([Edit("rotated_even = even * cos - odd * sin", "rotated_even = even * cos + odd * sin"),
                   Edit("rotated_odd = even * sin + odd * cos", "rotated_odd = -even * sin + odd * cos")],
                  ["16-rotate", "16-rotate-batched", "16-attention", "16-gpt", "16-steps"]),
    # Angles in float32 whatever x's dtype: float32's rounding in float64 checks.
    "float32-angles": ([Edit("angles = positions.to(x.dtype)[..., None] * theta",
                             "angles = (positions.float()[..., None] * theta.float()).to(x.dtype)")],
                       ["16-rotate", "16-rotate-batched"]),
    # Every cached key rotated again at each step, by its position, as if
    # the cache held unrotated keys: rotated twice.
    "cache-unrotated-keys": ([Edit("k, v = cache.append(layer, k, v)",
                                   "k, v = cache.append(layer, k, v)\n"
                                   "        k = apply_rope(k, torch.arange(total, device=idx.device))")],
                             ["16-steps", "16-chunks", "16-padding"]),
    # Positions made on the CPU whatever idx's device: right on a CPU, a
    # device mismatch on a GPU (the meta device stands in for it).
    "positions-on-the-cpu": ([Edit("positions = torch.arange(start, total, device=idx.device)",
                                   "positions = torch.arange(start, total)")], ["16-device"]),
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("16", source, tmp_path_factory.mktemp(name))


def _run(module: ModuleType, check_id: str) -> list[object]:
    return plan_values(PLAN, module, check_id)


def _passes(check, got: list[object], want: list[object]) -> bool:
    return all_pass(check, got, want)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE_SOURCE, tmp_path_factory, "ref")


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, list[object]]:
    results = {check.id: _run(reference, check.id) for check in VALUE_CHECKS}
    assert not [cid for cid, values in results.items() if any(isinstance(v, Exception) for v in values)]
    return results


def test_the_reference_passes_its_own_checks(expected):
    # The judged properties (scores, norms, shifted outputs) hold for the reference.
    assert not [c.id for c in VALUE_CHECKS if not _passes(c, expected[c.id], expected[c.id])]


@pytest.mark.parametrize("style", STYLES)
def test_correct_solutions_written_differently_pass_every_check(style, expected, tmp_path_factory):
    source = apply_edits(REFERENCE_SOURCE, STYLES[style], label=style)
    module = _module(source, tmp_path_factory, style)
    assert not [c.id for c in VALUE_CHECKS if not _passes(c, _run(module, c.id), expected[c.id])]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_mistakes_beyond_the_variants_fail_their_checks(mistake, expected, tmp_path_factory):
    edits, must_fail = MISTAKES[mistake]
    module = _module(apply_edits(REFERENCE_SOURCE, edits, label=mistake), tmp_path_factory, mistake)
    still_pass = [cid for cid in must_fail
                  if _passes(next(c for c in checks.CHECKS if c.id == cid), _run(module, cid), expected[cid])]
    assert not still_pass


def test_a_clockwise_rotation_keeps_the_properties_so_they_pay_only_beside_the_values(expected, tmp_path_factory):
    edits, _ = MISTAKES["clockwise"]
    module = _module(apply_edits(REFERENCE_SOURCE, edits, label="clockwise"), tmp_path_factory, "clockwise-props")
    relative = next(c for c in checks.CHECKS if c.id == "16-relative")
    norms = next(c for c in checks.CHECKS if c.id == "16-norms")
    # The scores stay relative (the property alone), the values are wrong.
    got = _run(module, "16-relative")
    assert all(checks._scores_relative(g, w) is None for g, w in zip(got, expected["16-relative"], strict=True))
    assert not _passes(relative, got, expected["16-relative"])
    assert _passes(norms, _run(module, "16-norms"), expected["16-norms"])
    assert "16-rotate" in relative.requires and "16-rotate" in norms.requires


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def _kwargs(check_id: str) -> list[dict]:
    return [c.kwargs for c in PLAN.calls[PLAN.slices[check_id]]]


def test_hidden_inputs_cover_what_the_checks_claim():
    angles = _kwargs("16-angles")
    assert any("base" not in k for k in angles) and len({k.get("base") for k in angles}) >= 3
    assert all(k["head_dim"] % 2 == 0 for k in angles)
    assert all(k["positions"].dim() == 1 for k in _kwargs("16-rotate"))
    batched = _kwargs("16-rotate-batched")
    assert all(k["positions"].shape == (k["x"].size(0), k["x"].size(2)) for k in batched)
    assert any(k["x"].size(0) != k["x"].size(1) for k in batched)      # a table lined up with the heads fails
    assert all(k["x"].dtype == torch.float64 for k in batched + _kwargs("16-rotate"))
    assert all(k["shift"] > 0 for k in _kwargs("16-relative") + _kwargs("16-attention"))
    attention = _kwargs("16-attention")
    kinds = {None if k["positions"] is None else k["positions"].dim() for k in attention}
    assert kinds == {None, 1, 2}
    assert all(k["head_dim"] % 2 == 1 for k in _kwargs("16-odd-head-dim"))
    for check_id in ("16-steps", "16-chunks"):
        steps = _kwargs(check_id)
        assert all(sum(k["chunks"]) == k["config"]["context_length"] for k in steps)
        assert all((k["config"]["d_model"] // k["config"]["num_heads"]) % 2 == 0 for k in steps)
    assert any(k["chunks"][0] == 1 for k in _kwargs("16-steps"))
    assert all(max(k["chunks"][1:]) >= 2 for k in _kwargs("16-chunks"))
    for k in _kwargs("16-padding"):
        lengths = [len(p) for p in k["prompts"]]
        assert min(lengths) == 1 and len(set(lengths)) >= 2 and k["config"]["num_layers"] >= 2
        assert all(int(p.max()) < k["pad_id"] for p in k["prompts"])


def test_every_cached_step_of_the_reference_is_its_full_forward(reference):
    # The equality the exercise is about, on every hidden input of 16-steps
    # and 16-chunks: what the checks compare against is the recomputation.
    for kwargs in _kwargs("16-steps") + _kwargs("16-chunks"):
        found = probes.steps(reference, **kwargs)
        assert torch.allclose(found["logits"], found["full"], atol=1e-12, rtol=0)


def test_the_reference_padded_prompts_are_each_prompt_alone(reference):
    for kwargs in _kwargs("16-padding"):
        found = probes.padded(reference, **kwargs)
        assert all(torch.allclose(r, a, atol=1e-12, rtol=0) for r, a in zip(found["rows"], found["alone"], strict=True))


def test_the_readme_s_weight_conversion_turns_one_pairing_into_the_other(reference, tmp_path_factory):
    # README, 'Two conventions': permuting the rows of W_query and W_key head
    # by head (Hugging Face's convert_llama_weights_to_hf.py) makes a
    # two-halves model compute what the interleaved one computes.
    from grader.course.pitfalls import load_variants

    halves_source = load_variants(load_course(check_files=False).exercise("16"), REPO_ROOT)["rope-halves-pairing"].source
    halves = _module(halves_source, tmp_path_factory, "halves")
    config = {"d_in": 6, "d_out": 12, "context_length": 7, "dropout": 0.0, "num_heads": 3}
    x = torch.randn(2, 7, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    interleaved, _ = probes.attention_module(reference, config, 1)
    converted, _ = probes.attention_module(halves, config, 1)
    heads, head_dim = 3, 4
    with torch.no_grad():
        for name in ("W_query", "W_key"):
            w = getattr(interleaved, name).weight
            permuted = w.view(heads, head_dim // 2, 2, 6).transpose(1, 2).reshape(12, 6)
            getattr(converted, name).weight.copy_(permuted)
        positions = torch.arange(7) + 3
        assert torch.allclose(converted(x, positions), interleaved(x, positions), atol=1e-12)
        q = torch.randn(2, 3, 7, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        assert not torch.allclose(halves.apply_rope(q, positions), reference.apply_rope(q, positions))


def test_the_feedback_figure_is_a_public_input_whose_reference_map_is_constant_along_diagonals(reference):
    (figure,) = checks.FIGURES
    found = probes.score_map(reference, **figure.call.kwargs)["scores"]
    n = figure.call.kwargs["n"]
    assert found.shape == (n, n)
    for offset in range(-n + 1, n):
        diagonal = found.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-12)
    assert found.std() > 1.0                                     # stripes, not one flat colour
