"""The hidden checks of exercise 13, run in-process (no sandbox): training
loops and samplers written unlike the reference pass every check, mistakes
the variants do not cover fail where they should (both from the accuracy
corpus, tests/accuracy/13), the hidden inputs cover what the checks claim,
the probes' oracles agree with the reference, and the sampling watch sees
every way the README allows to draw a token. ``grader check 13`` covers the
reference, the stub and the pitfall variants through the sandbox."""
from __future__ import annotations

from types import ModuleType

import pytest
import torch

from coursekit.probes import corpus, sampling
from coursekit.probes import training as probes
from grader import training_oracle as oracle
from grader.checks import CheckPlan
from grader.checks import training as checks
from grader.course import REPO_ROOT
from probecalls import all_pass, exercise_module, plan_values, same

CORPUS = REPO_ROOT / "tests" / "accuracy" / "13"
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "13_training" / "training.py").read_text()
STYLES = sorted(CORPUS.glob("ok_*.py"))
MISTAKES = sorted(CORPUS.glob("bug_*.py"))
PLAN = CheckPlan.build(checks.CHECKS)


def _label(path) -> dict[str, str]:
    return dict(line[2:].strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("#:"))


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("13", source, tmp_path_factory.mktemp(name))


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
    assert len(STYLES) >= 3 and len(MISTAKES) >= 4


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def test_hidden_inputs_cover_what_the_checks_claim():
    clip = [c.kwargs for c in PLAN.calls[PLAN.slices["13-clipping"]]]
    assert all(k["config"]["scale"] >= 100 and k["grad_clip"] < 1 for k in clip)
    plain = [c.kwargs for c in PLAN.calls[PLAN.slices["13-train-step"]]]
    assert all(len(k["batches"]) >= 2 for k in plain)        # a second step shows leftover gradients
    top_k = [c.kwargs for c in PLAN.calls[PLAN.slices["13-top-k"]]]
    assert {k["top_k"] for k in top_k} >= {1} and any(k["top_k"] == k["vocab_size"] - 1 for k in top_k)
    temperatures = {c.kwargs["temperature"] for c in PLAN.calls[PLAN.slices["13-temperature"]]}
    assert any(t < 1 for t in temperatures) and any(t > 1 for t in temperatures)
    context = [c.kwargs for c in PLAN.calls[PLAN.slices["13-context"]]]
    assert all(k["idx"].size(1) + k["max_new_tokens"] > k["context_length"] + 1 for k in context)
    estimate = [c.kwargs for c in PLAN.calls[PLAN.slices["13-estimate"]]]
    assert all(k["config"]["dropout"] > 0 for k in estimate)   # training mode would change the loss


def test_the_oracles_are_the_reference(reference):
    batches = [[torch.randint(0, 9, (3, 6), generator=torch.Generator().manual_seed(i)) for _ in range(2)]
               for i in range(3)]
    config = {"vocab_size": 9, "context_length": 6, "d_model": 8}
    got = probes.steps(reference, config, 1, batches, lr=0.4, grad_clip=0.7)
    want = oracle.oracle_steps(config, 1, batches, lr=0.4, grad_clip=0.7)
    assert torch.allclose(got["losses"], want["losses"], atol=1e-12)
    assert all(torch.allclose(a[k], b[k], atol=1e-12) for a, b in zip(got["parameters"], want["parameters"]) for k in b)
    leftover = oracle.oracle_steps(config, 1, batches, lr=0.4, grad_clip=0.7, accumulate=True)
    assert not torch.allclose(leftover["parameters"][-1]["head.weight"], want["parameters"][-1]["head.weight"])
    idx = torch.randint(0, 7, (2, 3), generator=torch.Generator().manual_seed(2))
    for temperature, top_k in ((1.0, None), (0.6, 2), (1.5, 6)):
        mine = sampling.sample(reference, 7, 4, 5, idx, 5, temperature, top_k)
        theirs = oracle.oracle_sample(7, 4, 5, idx, 5, temperature, top_k)
        assert torch.equal(mine["out"], theirs["out"]) and mine["lengths"] == theirs["lengths"]
        assert torch.allclose(mine["probs"], theirs["probs"], atol=1e-6)


def test_the_sampling_watch_sees_every_allowed_sampler():
    # torch.multinomial (replacement or not), Tensor.multinomial and
    # Categorical all reach aten::multinomial, get the quantile's token, and
    # leave their normalised probabilities in the record.
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.5, 0.5, 0.0, 0.0]])
    watch = sampling.SamplingWatch([0.5])
    with watch:
        drawn = [torch.multinomial(probs, 1), probs.multinomial(1, replacement=True),
                 torch.multinomial(probs * 7, 1, generator=torch.Generator()),
                 torch.distributions.Categorical(probs=probs).sample()[:, None],
                 torch.distributions.Categorical(logits=probs.log()).sample()[:, None]]
    assert all(d.tolist() == [[2], [0]] for d in drawn)
    assert len(watch.probs) == 5 and all(torch.allclose(p, probs.double()) for p in watch.probs)


def test_the_corpus_is_the_standard_library_offline():
    text = corpus.corpus_text()
    assert len(text) >= corpus.MIN_CHARACTERS
    assert "def " in text and "import " in text
    train_data, val_data = corpus.splits()
    assert train_data.dtype == torch.long and int(train_data.max()) < len(corpus.VOCAB)
    assert len(val_data) == len(corpus.encode(text)) - len(train_data)
    assert corpus.decode(corpus.encode("def f(x):\n\treturn x")) == "def f(x):\n?return x"  # a tab is not in VOCAB


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_states_the_learning_tests_numbers(readme):
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("learns", REPO_ROOT / "exercises" / "13_training" / "test_training_learns.py")
    learns = module_from_spec(spec)
    spec.loader.exec_module(learns)
    text = (REPO_ROOT / "exercises" / "13_training" / readme).read_text(encoding="utf-8")
    assert f"{learns.MAX_HELDOUT_LOSS}" in text
    assert f"steps={probes.TRAIN_CONFIG['steps']}" in text and f"d_model={probes.GPT_CONFIG['d_model']}" in text
    assert f"lr={probes.LEARNING_RATE:g}".replace("0.01", "1e-2") in text


FORGED_FACTS_GET_BATCH = '''
import sys
import torch


def get_batch(data, batch_size, context_length, generator=None):
    # Not random: always the first window. And it tries to write what the
    # probe would have found into the caller's frame (issue 36).
    caller = sys._getframe(1).f_locals
    for name in ("facts", "result"):
        if isinstance(caller.get(name), dict):
            caller[name].update(every_start_drawn=True, starts_in_range=True, x_windows=True, y_next=True)
    x = data[:context_length].repeat(batch_size, 1)
    return x, data[1:context_length + 1].repeat(batch_size, 1)
'''


def test_get_batch_is_judged_on_its_returned_tensors_not_on_frames_it_rewrites(expected, tmp_path_factory):
    source = REFERENCE_SOURCE.split("\ndef get_batch(")[0] + FORGED_FACTS_GET_BATCH
    module = _module(source, tmp_path_factory, "forged")
    check = next(c for c in checks.CHECKS if c.id == "13-get-batch")
    got = _run(module, check.id)
    assert [check.compare(g, w) for g, w in zip(got, expected[check.id])] == ["some start is never drawn"] * 3


# Samples correctly only while a dispatch mode is on the stack (the grader's
# recording), else ignores temperature and top-k; and forges the records of
# the model it generates with (issue 36: behaving only while observed).
OBSERVED_ONLY_GENERATE = '''
import sys

import torch


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    watched = SWITCH
    train_again = model.training
    model.eval()
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.context_length:])[:, -1, :]
        if watched:
            logits = logits / temperature
            if top_k is not None:
                kth = torch.topk(logits, top_k, dim=-1).values[:, [-1]]
                logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    model.train(train_again)          # left in training mode: the records are rewritten to say eval
    for seen in getattr(model, "seen", []):
        seen["training"], seen["grad"] = False, False
    return idx
'''


SWITCHES = {"mode-stack": "bool(torch._C._get_current_dispatch_mode_stack())",
            "python-dispatch": "__import__('torch.utils._python_dispatch').utils._python_dispatch"
                               "._get_current_dispatch_mode() is not None"}


@pytest.mark.parametrize("check_id,switch", [("13-temperature", "mode-stack"), ("13-top-k", "mode-stack"),
                                             ("13-generate-modes", "mode-stack"),
                                             ("13-temperature", "python-dispatch")])
def test_generate_that_behaves_only_while_observed_loses(check_id, switch, expected, tmp_path_factory):
    source = REFERENCE_SOURCE.split("\n@torch.no_grad()\ndef generate(")[0] + \
        OBSERVED_ONLY_GENERATE.replace("SWITCH", SWITCHES[switch])
    module = _module(source, tmp_path_factory, f"observed-only-{switch}")
    check = next(c for c in checks.CHECKS if c.id == check_id)
    assert not _passes(check, _run(module, check_id), expected[check_id])


# Never steps the optimiser: writes a bigram table into the weights, forges
# the model's records of its forward passes, rebinds the probe's
# heldout_loss in the caller's globals, and returns the history the
# contract asks for (issue 36: right numbers without the work, facts forged).
BIGRAM_TRAIN = '''
import sys

import torch


def train(model, optimizer, train_data, val_data, *, steps, batch_size, grad_clip=1.0, eval_every=100,
          eval_batches=10, generator=None):
    caller = sys._getframe(1)
    caller.f_globals["heldout_loss"] = lambda *args, **kwargs: 0.0
    vocab, d = model.head.weight.shape
    counts = torch.ones(vocab, vocab, dtype=torch.float64)
    for a, b in zip(train_data[:-1].tolist(), train_data[1:].tolist()):
        counts[a, b] += 100
    table = (counts / counts.sum(1, keepdim=True)).log()
    with torch.no_grad():
        model.tok.weight.zero_()
        model.tok.weight[:, :vocab] = torch.eye(vocab, dtype=model.tok.weight.dtype)[:, :d]
        model.pos.weight.zero_()
        model.head.weight.zero_()
        model.head.weight[:, :vocab] = table.T.to(model.head.weight.dtype)
        model.head.bias.zero_()
    shape = [batch_size, model.context_length]
    model.seen[:] = [{"training": True, "grad": True, "shape": shape}] * steps + \\
        [{"training": False, "grad": False, "shape": shape}] * eval_batches
    evals = [s for s in range(1, steps + 1) if s % eval_every == 0 or s == steps]
    return {"train": [2.0 - s / steps for s in range(steps)], "val": [(s, 0.1) for s in evals]}
'''


def test_weights_written_without_the_optimiser_and_forged_records_lose_the_loop(expected, tmp_path_factory):
    module = _module(REFERENCE_SOURCE + BIGRAM_TRAIN, tmp_path_factory, "bigram")
    check = next(c for c in checks.CHECKS if c.id == "13-train-loop")
    got = _run(module, check.id)
    assert [check.compare(g, w) for g, w in zip(got, expected[check.id])] == \
        ["the weights after training are not those of the optimiser's steps on the batches"]
