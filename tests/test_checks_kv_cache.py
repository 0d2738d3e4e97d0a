"""The hidden checks of exercise 14, run in-process (no sandbox): correct
caches written unlike the reference pass every check, wrong ones that the
variants do not cover fail where they should (both from the accuracy
corpus, tests/accuracy/14), the hidden inputs cover what the checks claim,
and the reference's cached logits are the full recomputation's at every
step. ``grader check 14`` covers the reference, the stub and the pitfall
variants through the sandbox."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.probes import kv_cache as probes
from grader.checks import CheckPlan
from grader.checks import kv_cache as checks
from grader.course import REPO_ROOT
from probecalls import all_pass, exercise_module, plan_values, same

CORPUS = REPO_ROOT / "tests" / "accuracy" / "14"
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "14_kv_cache" / "kv_cache.py").read_text()
STYLES = sorted(CORPUS.glob("ok_*.py"))
MISTAKES = sorted(CORPUS.glob("bug_*.py"))
PLAN = CheckPlan.build(checks.CHECKS)


def _label(path) -> dict[str, str]:
    return dict(line[2:].strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("#:"))


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("14", source, tmp_path_factory.mktemp(name))


def _run(module: ModuleType, check_id: str) -> list[object]:
    return plan_values(PLAN, module, check_id)


def _passes(check, got: list[object], want: list[object]) -> bool:
    return all_pass(check, got, want)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE_SOURCE, tmp_path_factory, "ref")


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, list[object]]:
    results = {check.id: _run(reference, check.id) for check in checks.CHECKS}
    assert not [cid for cid, values in results.items() if any(isinstance(v, Exception) for v in values)]
    return results


@pytest.mark.parametrize("path", STYLES, ids=lambda p: p.stem)
def test_correct_solutions_written_differently_pass_every_check(path, expected, tmp_path_factory):
    module = _module(path.read_text(), tmp_path_factory, path.stem)
    failed = [check.id for check in checks.CHECKS if not _passes(check, _run(module, check.id), expected[check.id])]
    assert not failed


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_mistakes_beyond_the_variants_fail_their_check(path, expected, tmp_path_factory):
    module = _module(path.read_text(), tmp_path_factory, path.stem)
    check_ids = _label(path)["fails"].strip(" []").split(", ")
    still_pass = [cid for cid in check_ids
                  if _passes(next(c for c in checks.CHECKS if c.id == cid), _run(module, cid), expected[cid])]
    assert not still_pass


def test_the_corpus_has_styles_and_mistakes():
    assert len(STYLES) >= 2 and len(MISTAKES) >= 4


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def _kwargs(check_id: str) -> list[dict]:
    return [c.kwargs for c in PLAN.calls[PLAN.slices[check_id]]]


def test_hidden_inputs_cover_what_the_checks_claim():
    steps = _kwargs("14-steps")
    assert all(sum(k["chunks"]) == k["config"]["context_length"] for k in steps)   # up to the whole context
    assert all(set(k["chunks"][1:]) == {1} for k in steps)
    assert any(k["chunks"][0] == 1 for k in steps) and any(k["chunks"][0] > 2 for k in steps)
    assert any(k["idx"].size(0) == 1 for k in steps)
    assert len({k["config"]["num_layers"] for k in steps}) >= 2
    chunks = _kwargs("14-chunks")
    assert all(max(k["chunks"][1:]) >= 2 for k in chunks)
    generate = _kwargs("14-generate")
    past = [k["idx"].size(1) + k["max_new_tokens"] > k["config"]["context_length"] + 1 for k in generate]
    assert True in past and False in past
    for k in _kwargs("14-padding"):
        lengths = [len(p) for p in k["prompts"]]
        assert min(lengths) == 1 and len(set(lengths)) >= 2 and k["config"]["num_layers"] >= 2
        assert all(int(p.max()) < k["pad_id"] for p in k["prompts"])   # the pad token is never a real one
        assert int(k["other_pads"].max()) < k["pad_id"] and int(k["next_ids"].max()) < k["pad_id"]
    for k in _kwargs("14-batch"):
        assert max(len(p) for p in k["prompts"]) + k["max_new_tokens"] <= k["config"]["context_length"]
    for k in _kwargs("14-batch-too-long"):
        assert max(len(p) for p in k["prompts"]) + k["max_new_tokens"] > k["config"]["context_length"]


def test_every_step_of_the_reference_is_the_full_recomputation(reference):
    # The equality the exercise is about, on every hidden input of 14-steps
    # and 14-chunks: what the checks compare against is the oracle itself.
    for kwargs in _kwargs("14-steps") + _kwargs("14-chunks"):
        got = probes.steps(reference, **kwargs)["logits"]
        want = probes.full_logits(probes.model(reference, kwargs["config"], kwargs["seed"]), kwargs["idx"])
        assert torch.allclose(got, want, atol=1e-12, rtol=0)


def test_the_reference_batch_is_each_prompt_alone(reference):
    for kwargs in _kwargs("14-batch"):
        got = probes.batch(reference, **kwargs)["tokens"]
        gpt = probes.model(reference, kwargs["config"], kwargs["seed"])
        alone = [probes.recomputed_generation(gpt, p[None], kwargs["max_new_tokens"])[0] for p in kwargs["prompts"]]
        assert all(torch.equal(g, a) for g, a in zip(got, alone, strict=True))


def test_a_cache_that_slides_past_the_context_loses_14_generate_on_every_draw(reference, tmp_path):
    """Greedy tokens hide small errors in the logits: 14-generate's draws
    must show the tokens of a sliding cache differ on every draw tried."""
    source = (REPO_ROOT / "tests" / "accuracy" / "14" / "bug_cache_slides.py").read_text()
    slides = exercise_module("14", source, tmp_path)
    check = next(c for c in checks.CHECKS if c.id == "14-generate")
    for seed in range(30):
        calls = check.calls(torch.Generator().manual_seed(7_000 + seed))
        assert any(not torch.equal(probes.generation(slides, **c.kwargs)["tokens"],
                                   probes.generation(reference, **c.kwargs)["tokens"]) for c in calls), seed


def test_the_reference_generation_is_the_recomputation(reference):
    for kwargs in _kwargs("14-generate"):
        got = probes.generation(reference, **kwargs)["tokens"]
        gpt = probes.model(reference, kwargs["config"], kwargs["seed"], kwargs["scale"])
        assert torch.equal(got, probes.recomputed_generation(gpt, kwargs["idx"], kwargs["max_new_tokens"]))


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_kv_cache_memory_is_gpt2_smalls(readme):
    text = (REPO_ROOT / "exercises" / "14_kv_cache" / readme).read_text(encoding="utf-8")
    per_token = 2 * 12 * 768 * 4   # key and value, 12 layers, d_model 768, float32
    assert f"{per_token:,}" in text and f"{per_token // 1024} KiB" in text
    assert f"{per_token * 1024 // 2**20} MiB" in text
