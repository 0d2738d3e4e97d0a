"""The hidden checks of exercise 18, run in-process (no sandbox): the
hidden inputs cover what the checks claim (past the context, the ring
wrapping several times, window 1 and windows longer than the sequence,
chunks longer than the window, padding), the plan is deterministic, and
what the checks compare against is right: the reference's cached logits
are its windowed recomputation at every step, its windowed model with a
window as long as the sequence is the shipped GPT with its positions
silenced, and its masks are the window's definition. ``grader check 18``
covers the reference, the stub and the pitfall variants through the sandbox."""
from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from coursekit.probes import sliding_window as probes
from grader.checks import CheckPlan
from grader.checks import sliding_window as checks
from grader.course import REPO_ROOT, load_course
from probecalls import exercise_module, same

PLAN = CheckPlan.build(checks.CHECKS)
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "18_sliding_window" / "sliding_window.py").read_text()
CORPUS = REPO_ROOT / "tests" / "accuracy" / "18"


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("18", source, tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE_SOURCE, tmp_path_factory, "ref")


def _kwargs(check_id: str) -> list[dict]:
    return [c.kwargs for c in PLAN.calls[PLAN.slices[check_id]]]


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def test_hidden_inputs_cover_what_the_checks_claim():
    cases = _kwargs("18-mask")[0]["cases"]
    assert any(window == 1 for _, _, window, _ in cases)
    assert any(window >= max(nq, nk) for nq, nk, window, _ in cases)
    assert any(nq != nk for nq, nk, _, _ in cases) and any(offset > 0 for *_, offset in cases)
    for check_id in ("18-steps", "18-chunks", "18-ring"):
        for k in [k for k in _kwargs(check_id) if "chunks" in k]:
            n, window = sum(k["chunks"]), k["window"]
            assert n > 2 * k["config"]["context_length"] - 1 and n >= 4 * window   # past the context, 3+ wraps
    assert all(set(k["chunks"][1:]) == {1} for k in _kwargs("18-steps"))
    assert any(k["chunks"][0] == 1 for k in _kwargs("18-steps"))
    assert any(k["chunks"][0] > k["window"] for k in _kwargs("18-steps"))
    assert any(max(k["chunks"][1:]) > k["window"] for k in _kwargs("18-chunks"))
    tagged = [k for k in _kwargs("18-ring") if "sizes" in k]   # the cache alone: chunks longer than its ring
    assert tagged and any(max(k["sizes"]) > k["window"] for k in tagged)
    assert any(sum(k["sizes"]) > 2 * k["window"] for k in tagged)
    assert any(k["window"] == 1 for k in _kwargs("18-steps") + _kwargs("18-chunks") + _kwargs("18-attention"))
    for check_id in ("18-attention", "18-forward"):
        pads = [k["pad_mask"] for k in _kwargs(check_id)]
        assert any(p is None for p in pads) and any(p is not None and p.any() for p in pads)
    fields = _kwargs("18-receptive-field")[0]["cases"]
    assert (0, 4) in fields and any(window == 1 for _, window in fields)


def test_masks_are_the_windows_definition(reference):
    for nq, nk, window, offset in _kwargs("18-mask")[0]["cases"]:
        mask = reference.sliding_window_mask(nq, nk, window, offset)
        want = torch.tensor([[not (offset + i - window < j <= offset + i) for j in range(nk)] for i in range(nq)])
        assert mask.dtype == torch.bool and torch.equal(mask, want)


def test_every_cached_step_of_the_reference_is_the_windowed_recomputation(reference):
    for kwargs in _kwargs("18-steps") + _kwargs("18-chunks") + [k for k in _kwargs("18-ring") if "chunks" in k]:
        got = probes.steps(reference, **kwargs)
        gpt = probes.nope_model(reference, kwargs["config"], kwargs["seed"])
        want = reference.windowed_forward(gpt, kwargs["idx"], kwargs["window"])
        assert torch.allclose(got["logits"], want, atol=1e-12, rtol=0)
        assert max(probes.ring_sizes(got)) == kwargs["window"] == max(got["held"])


def test_a_window_as_long_as_the_sequence_is_the_shipped_gpt_without_positions(reference):
    config = {"vocab_size": 9, "context_length": 7, "d_model": 8, "num_heads": 2, "num_layers": 2}
    gpt = probes.nope_model(reference, config, 3)
    shipped = load_module(REPO_ROOT / "solutions" / "12_gpt", "gpt").GPT(**config).to(torch.float64).eval()
    shipped.load_state_dict({**gpt.state_dict(), "pos_emb.weight": torch.zeros(7, 8, dtype=torch.float64)},
                            strict=False)
    idx = torch.randint(0, 9, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(reference.windowed_forward(gpt, idx, 7), shipped(idx), atol=1e-12, rtol=0)


def test_the_reference_rings_hold_position_p_in_slot_p_mod_window(reference):
    # What 18-ring compares, from the outside: the keys a slot holds are
    # the keys of the position the README puts there.
    config = {"vocab_size": 9, "context_length": 5, "d_model": 8, "num_heads": 2, "num_layers": 1}
    idx = torch.randint(0, 9, (1, 11), generator=torch.Generator().manual_seed(1))
    window = 4
    gpt = probes.nope_model(reference, config, 5)
    result = probes.steps(reference, config, 5, idx, window, [3] + [1] * 8)
    with torch.no_grad():
        h = gpt.blocks[0].norm1(gpt.tok_emb(idx))
        keys = gpt.blocks[0].attn.W_key(h).reshape(1, 11, 2, 4).transpose(1, 2)   # (b, h, n, hd)
    ring = result["rings"][-1][0][0]
    assert ring.shape == (1, 2, window, 4)
    for p in range(11 - window, 11):
        assert torch.allclose(ring[:, :, p % window], keys[:, :, p], atol=1e-12)


def test_the_corpus_passes_or_fails_as_labelled(reference, tmp_path_factory):
    if not CORPUS.is_dir():
        pytest.skip("no corpus for 18")
    expected = {}
    for path in sorted(CORPUS.glob("*.py")):
        module = _module(path.read_text(), tmp_path_factory, path.stem)
        label = dict(line[2:].strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("#:"))
        failed = []
        for check in checks.CHECKS:
            if check.measured or not check.calls(torch.Generator().manual_seed(check.seed)):
                continue
            calls = PLAN.calls[PLAN.slices[check.id]]
            if check.id not in expected:
                expected[check.id] = [_call(reference, c) for c in calls]
            got = [_call(module, c) for c in calls]
            if any(isinstance(g, Exception) or check.compare(g, w) is not None
                   for g, w in zip(got, expected[check.id], strict=True)):
                failed.append(check.id)
        if label["expect"].strip() == "full":
            assert not failed, f"{path.name}: {failed}"
        else:
            wanted = label["fails"].strip(" []").split(", ")
            assert set(wanted) & set(failed), f"{path.name}: fails {failed}, label says {wanted}"


def _call(module: ModuleType, call) -> object:
    probe_module, function = call.probe.split(":")
    try:
        return getattr(importlib.import_module(probe_module), function)(module, **call.kwargs)
    except Exception as exc:  # noqa: BLE001 - a wrong solution may raise: that is its result
        return exc


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_worked_numbers(readme, reference):
    text = (REPO_ROOT / "exercises" / "18_sliding_window" / readme).read_text(encoding="utf-8")
    assert f"{32 * 4095 + 1:,}" in text and str(reference.receptive_field(32, 4096)) in text
    assert str([reference.receptive_field(layers, 4) for layers in (1, 2, 3)]) in text
    rows = reference.sliding_window_mask(2, 7, 3, offset=5).int().tolist()
    assert f"tensor([{rows[0]},\n        {rows[1]}], dtype=torch.int32)".replace("],", "],") in text
    picture = reference.sliding_window_mask(6, 6, 3).int().tolist()
    for i, row in enumerate(picture):
        assert f"query {i}         " + "  ".join(str(v) for v in row) in text
    per_token = 2 * 32 * 8 * 128 * 2      # keys and values, 32 layers, 8 kv heads, 128 dims, 16-bit
    assert f"{per_token:,}" in text and f"{per_token // 1024} KiB" in text
    assert f"{per_token * 4096 // 2**20} MiB" in text and f"{per_token * 32768 // 2**30} GiB" in text
    # The ring table: positions returned by append after 0..6 with window 4.
    cache = reference.RollingKVCache(1, 4)
    for p in range(8):
        _, _, positions = cache.append(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    assert str([int(p) for p in positions]) in text


def test_the_feedback_figures_show_the_window_and_the_growing_reach(reference):
    from grader.checks import figures_for

    exercise = load_course(check_files=False).exercise("18")
    plan = CheckPlan.build(checks.CHECKS, figures=figures_for(exercise))
    assert set(plan.figures) == {"sliding-window", "receptive-field"}
    for figure, index in plan.figures.values():
        value = _call(reference, plan.calls[index])[figure.path[0]]
        queries, keys = figure.axes
        assert tuple(value.shape) == (len(queries), len(keys)) and set(value.unique().tolist()) <= {0.0, 1.0}
        if figure.name == "sliding-window":
            assert (value.sum(-1) <= checks.FIGURE_WINDOW).all()
        else:   # after L layers: the last L (W - 1) + 1 positions, exactly
            assert value.sum(-1).tolist() == [reference.receptive_field(L, checks.FIGURE_WINDOW) for L in (1, 2, 3)]
            assert value[:, -1].all()
