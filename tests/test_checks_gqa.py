"""The hidden checks of exercise 17, run in-process (no sandbox): the
reference passes against itself and its cache is what it claims; every
pitfall variant fails the checks that name it; correct solutions written
differently pass every check and wrong ones beyond the variants fail where
their label says (the accuracy corpus, tests/accuracy/17); the hidden
inputs cover what the checks claim. ``grader check 17`` covers the
reference, the stub and the variants through the sandbox."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.probes import gqa as probes
from grader.checks import CheckPlan, counting
from grader.checks import gqa as checks
from grader.checks.forbidden import unwrapped
from grader.course import REPO_ROOT, load_course
from grader.course.pitfalls import load_variants
from probecalls import all_pass, exercise_module, plan_values, same

CORPUS = REPO_ROOT / "tests" / "accuracy" / "17"
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "17_gqa" / "gqa.py").read_text()
PLAN = CheckPlan.build(checks.CHECKS)
BY_ID = {check.id: check for check in checks.CHECKS}
# Checks with calls of their own (the forbidden-calls check reads the source).
CALLED = [c.id for c in checks.CHECKS if not c.id.endswith("no-forbidden-calls")]


def _label(path) -> dict[str, str]:
    return dict(line[2:].strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("#:"))


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("17", source, tmp_path_factory.mktemp(name))


def _run(module: ModuleType, check_id: str) -> list[object]:
    return plan_values(PLAN, module, check_id)


def _passes(check_id: str, got: list[object], want: list[object]) -> bool:
    return all_pass(BY_ID[check_id], got, want)


def _passed(module: ModuleType, expected: dict[str, list[object]]) -> set[str]:
    return counting(checks.CHECKS, {cid for cid in CALLED if _passes(cid, _run(module, cid), expected[cid])})


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE_SOURCE, tmp_path_factory, "ref")


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, list[object]]:
    results = {cid: _run(reference, cid) for cid in CALLED}
    assert not [cid for cid, values in results.items() if any(isinstance(v, Exception) for v in values)]
    return results


def test_the_reference_passes_against_itself(expected):
    assert not [cid for cid in CALLED if not _passes(cid, expected[cid], expected[cid])]


def test_the_references_cache_equals_the_recomputation_and_holds_the_kv_heads(expected):
    for kwargs, result in zip(_kwargs("17-cache-values"), expected["17-cache-values"], strict=True):
        result = result["value"]
        config = kwargs["config"]
        head_dim = config["d_out"] // config["num_heads"]
        for out, full, cache, x in zip(result["outputs"], result["full"], result["caches"], kwargs["xs"]):
            torch.testing.assert_close(out, full, atol=1e-12, rtol=1e-10)
            keys, values = cache[-1]
            assert keys.shape == values.shape == (x.size(0), config["num_kv_heads"], x.size(1), head_dim)
            # 8 bytes (float64) x 2 (key, value) x num_kv_heads x head_dim per token
            assert probes.measured_bytes_per_token(cache[-1]) == 16 * config["num_kv_heads"] * head_dim


def test_the_reference_equals_the_shipped_multihead_attention(expected):
    for result in expected["17-multihead"]:
        result = result["value"]
        torch.testing.assert_close(result["output"], result["multihead"], atol=1e-12, rtol=1e-10)


VARIANT_FAILS = {
    "kv-repeat-tiled": {"17-repeat-kv", "17-values", "17-multihead", "17-cache-values"},
    "kv-cache-repeated-heads": {"17-cache-heads"},
    "kv-proj-full-width": {"17-values", "17-state", "17-cache-heads"},
    "kv-heads-not-divisible": {"17-divisibility"},
    "scale-by-kv-width": {"17-values", "17-multihead"},
    "cache-cat-heads-dim": {"17-cache-values"},
    "cache-mask-rows": {"17-cache-values"},
}


def test_every_variant_is_listed():
    exercise = load_course(check_files=False).exercise("17")
    assert set(load_variants(exercise, REPO_ROOT)) == set(VARIANT_FAILS)


@pytest.mark.parametrize("pitfall", sorted(VARIANT_FAILS))
def test_each_variant_fails_the_checks_that_name_it(pitfall, expected, tmp_path_factory):
    exercise = load_course(check_files=False).exercise("17")
    variant = _module(load_variants(exercise, REPO_ROOT)[pitfall].source, tmp_path_factory, pitfall)
    failed = set(CALLED) - _passed(variant, expected)
    assert VARIANT_FAILS[pitfall] <= failed
    assert all(pitfall in BY_ID[cid].pitfalls for cid in VARIANT_FAILS[pitfall])
    if pitfall == "kv-cache-repeated-heads":   # the outputs are right: only the cache's size gives it away
        assert failed == {"17-cache-heads"}


@pytest.mark.parametrize("path", sorted(CORPUS.glob("ok_*.py")), ids=lambda p: p.stem)
def test_correct_solutions_written_differently_pass_every_check(path, expected, tmp_path_factory):
    module = _module(path.read_text(), tmp_path_factory, path.stem)
    assert set(CALLED) <= _passed(module, expected)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("bug_*.py")), ids=lambda p: p.stem)
def test_mistakes_beyond_the_variants_fail_their_check(path, expected, tmp_path_factory):
    module = _module(path.read_text(), tmp_path_factory, path.stem)
    check_ids = _label(path)["fails"].strip(" []").split(", ")
    assert not set(check_ids) & _passed(module, expected)


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def _kwargs(check_id: str) -> list[dict]:
    return [unwrapped(c).kwargs for c in PLAN.calls[PLAN.slices[check_id]]]


def test_hidden_inputs_cover_what_the_checks_claim():
    pairs = {(k["config"]["num_heads"], k["config"]["num_kv_heads"]) for k in _kwargs("17-values")}
    assert any(g == 1 for _, g in pairs) and any(g == h for h, g in pairs) and any(1 < g < h for h, g in pairs)
    assert {k["config"]["qkv_bias"] for k in _kwargs("17-values")} == {True, False}
    assert all(k["x"].dtype == torch.float64 for k in _kwargs("17-values"))
    cache = _kwargs("17-cache-heads")
    assert any(1 < k["config"]["num_kv_heads"] < k["config"]["num_heads"] for k in cache)
    assert any(k["config"]["num_kv_heads"] == 1 for k in cache)
    assert all(sum(k["chunks"]) == k["config"]["context_length"] and len(k["xs"]) == 2 for k in cache)
    assert all(k["xs"][0].size(0) != k["xs"][1].size(0) for k in cache)   # a stash of the other sequence shows
    assert any(k["chunks"][0] == 1 for k in _kwargs("17-cache-values"))
    assert any(max(k["chunks"][1:]) > 1 for k in _kwargs("17-cache-values"))
    raised = [(k["kwargs"]["num_heads"] % k["kwargs"]["num_kv_heads"], k["kwargs"]["d_out"] % k["kwargs"]["num_heads"])
              for k in _kwargs("17-divisibility")]
    assert (0, 0) in raised and any(a and not b for a, b in raised) and any(b and not a for a, b in raised)
    repeats = [k["n_rep"] for k in _kwargs("17-repeat-kv")]
    assert 1 in repeats and max(repeats) >= 3
