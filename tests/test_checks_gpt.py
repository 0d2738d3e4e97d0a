"""The hidden checks of exercise 12, run in-process (no sandbox): correct
GPTs written unlike the reference pass every check, wrong ones that the
variants do not cover fail where they should (both from the accuracy
corpus, tests/accuracy/12), the hidden inputs cover what the checks claim,
and the parameter counts the README states are the reference's (its worked
example is recomputed by tests/test_readme_examples.py). ``grader check 12``
covers the reference, the stub and the pitfall variants through the sandbox."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.probes import gpt as probes
from grader import gpt_oracle
from grader.checks import CheckPlan
from grader.checks import gpt as checks
from grader.checks.forbidden import unwrapped
from grader.course import REPO_ROOT
from probecalls import all_pass, exercise_module, plan_values, same

# Correct GPTs in other styles (ok_*) and mistakes outside the variants
# (bug_*, each labelled with the check that must catch it): the accuracy
# corpus grades them through the sandbox; here they run in-process, check
# by check, so that a failure names the check.
CORPUS = REPO_ROOT / "tests" / "accuracy" / "12"
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "12_gpt" / "gpt.py").read_text()


def _label(path) -> dict[str, str]:
    return dict(line[2:].strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("#:"))


STYLES = sorted(CORPUS.glob("ok_*.py"))
MISTAKES = sorted(CORPUS.glob("bug_*.py"))

PLAN = CheckPlan.build(checks.CHECKS)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("12", source, tmp_path_factory.mktemp(name))


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
    # The label's meaning (tests/accuracy/test_accuracy.py): at least one of these checks fails.
    failing = [cid for cid in check_ids
               if not _passes(next(c for c in checks.CHECKS if c.id == cid), _run(module, cid), expected[cid])]
    assert failing, f"none of {check_ids} fails"


def test_the_corpus_has_styles_and_mistakes():
    assert len(STYLES) >= 3 and len(MISTAKES) >= 4


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def _kwargs(check_id: str) -> list[dict]:
    """The hidden inputs of a check's calls (each recorded: see forbidden.observed)."""
    return [unwrapped(c).kwargs for c in PLAN.calls[PLAN.slices[check_id]]]


def test_hidden_inputs_cover_what_the_checks_claim():
    full = _kwargs("12-logits")
    assert any(k["idx"].size(0) == 1 for k in full)
    assert all(k["idx"].size(1) == k["config"]["context_length"] for k in full)
    assert {k["config"]["tie_weights"] for k in full} == {True, False}
    assert {k["config"]["qkv_bias"] for k in full} == {True, False}
    assert len({k["config"]["num_heads"] for k in full}) >= 3
    assert len({k["config"]["num_layers"] for k in full}) >= 2
    short = _kwargs("12-short-inputs")
    assert all(k["idx"].size(1) < k["config"]["context_length"] for k in short)
    blocks = _kwargs("12-block")
    assert any(k["x"].size(1) < k["config"]["context_length"] for k in blocks)
    tying = [k["config"]["tie_weights"] for k in _kwargs("12-tying")]
    assert True in tying and False in tying


def test_the_oracle_is_the_reference(reference):
    # The trusted side's oracle (PyTorch's pre-norm layer) and the reference agree,
    # and the oracle's arrangements for naming mistakes really are other blocks.
    config = {"vocab_size": 9, "context_length": 5, "d_model": 6, "num_heads": 2, "num_layers": 2, "qkv_bias": True}
    idx = torch.randint(0, 9, (2, 4), generator=torch.Generator().manual_seed(0))
    got = probes.logits(reference, config, 3, idx)["logits"]
    assert torch.allclose(got, gpt_oracle.oracle_logits(config, probes.gpt_weights(config, 3), idx), atol=1e-5)
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1))
    block = {"d_model": 6, "num_heads": 2, "context_length": 5, "qkv_bias": True}
    weights = probes.block_weights(block, 4)
    outs = {a: gpt_oracle.oracle_block(block, weights, x, a) for a in ("pre-norm", "post-norm", "residual-after-norm")}
    assert torch.allclose(probes.block_output(reference, block, 4, x)["output"], outs["pre-norm"], atol=1e-5)
    assert not torch.allclose(outs["pre-norm"], outs["post-norm"], atol=1e-3)
    assert not torch.allclose(outs["post-norm"], outs["residual-after-norm"], atol=1e-3)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_parameter_counts_are_the_reference_counts(readme, reference):
    text = " ".join((REPO_ROOT / "exercises" / "12_gpt" / readme).read_text(encoding="utf-8").split())
    with torch.device("meta"):  # GPT-2 small's shapes, without its memory
        counts = [sum(p.numel() for p in reference.GPT(50257, 1024, 768, 12, 12, **kw).parameters())
                  for kw in ({"qkv_bias": True}, {}, {"qkv_bias": True, "tie_weights": False})]
    for count in counts:
        assert f"{count:,}" in text
    saved = 50257 * 768  # what tying saves
    assert (f"{saved / 1e6:.1f} million" if readme == "README.md" else f"{round(saved / 1e4)} 万") in text
