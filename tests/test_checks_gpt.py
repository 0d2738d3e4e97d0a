"""The hidden checks of exercise 12, run in-process (no sandbox): correct
GPTs written unlike the reference pass every check, wrong ones that the
variants do not cover fail where they should, the hidden inputs cover what
the checks claim, and the README's worked example is what the reference
computes (in both languages). ``grader check 12`` covers the reference, the
stub and the pitfall variants through the sandbox."""
from __future__ import annotations

import doctest
import importlib
import re
from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from coursekit.probes import gpt as probes
from grader.checks import CheckPlan
from grader.checks import gpt as checks
from grader.course import REPO_ROOT, load_course
from grader.submissions import assemble
from probecalls import same

# Correct, unlike the reference: head created before the embedding and tied
# the other way round, a registered buffer of position ids, blocks appended
# in a loop, ff built from a list, the causal attention reached through a
# helper, the ValueError raised after the embeddings are looked up.
POSITION_BUFFER = '''
import torch
from torch import nn
from multihead import MultiHeadAttention

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        layers = [nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)]
        self.ff = nn.Sequential(*layers)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias=qkv_bias)
        self.norm2, self.norm1 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def _branch(self, sublayer, norm, x):
        return self.drop(sublayer(norm(x)))

    def forward(self, x):
        x = x + self._branch(self.attn, self.norm1, x)
        return x + self._branch(self.ff, self.norm2, x)

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        if tie_weights:
            self.tok_emb.weight = self.head.weight
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.register_buffer("position_ids", torch.arange(context_length), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList()
        for _ in range(num_layers):
            self.blocks.append(GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias))
        self.final_norm = nn.LayerNorm(d_model)

    def forward(self, idx):
        b, n = idx.shape
        if n > self.position_ids.numel():
            raise ValueError("sequence longer than the context")
        h = self.drop(self.tok_emb(idx) + self.pos_emb(self.position_ids[:n]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.final_norm(h))
'''

# Correct, functional style: F.embedding and a slice of pos_emb.weight (no
# call of pos_emb), positions broadcast per sequence nowhere, F.dropout with
# training=self.training, logits by einsum with head.weight, GELU from F.
FUNCTIONAL = '''
import torch
import torch.nn.functional as F
from torch import nn
import multihead as mh

class _GELU(nn.Module):
    def forward(self, x):
        return F.gelu(x)

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = mh.MultiHeadAttention(d_in=d_model, d_out=d_model, context_length=context_length,
                                          dropout=dropout, num_heads=num_heads, qkv_bias=qkv_bias)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), _GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        attended = self.attn(self.norm1(x))
        x = torch.add(x, F.dropout(attended, self.drop.p, training=self.training))
        fed = self.ff(self.norm2(x))
        return torch.add(x, F.dropout(fed, self.drop.p, training=self.training))

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                     for _ in range(num_layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        if idx.shape[-1] > self.context_length:
            raise ValueError(f"{idx.shape[-1]} > {self.context_length}")
        x = F.embedding(idx, self.tok_emb.weight) + self.pos_emb.weight[: idx.shape[-1]]
        x = F.dropout(x, self.drop.p, training=self.training)
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, x.shape[-1:], self.final_norm.weight, self.final_norm.bias, self.final_norm.eps)
        return torch.einsum("bnd,vd->bnv", x, self.head.weight)
'''

# Correct: positions per sequence, (b, n), via expand; blocks applied with
# functools.reduce; the head built with tying as a separate method.
BATCHED_POSITIONS = '''
import functools
import torch
from torch import nn
from multihead import MultiHeadAttention

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="none"),
                                nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        residual = x
        x = residual + self.drop(self.attn(self.norm1(residual)))
        residual = x
        return residual + self.drop(self.ff(self.norm2(residual)))

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self._make_head(vocab_size, d_model, tie_weights)

    def _make_head(self, vocab_size, d_model, tie):
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        b, n = idx.shape
        if n > self.context_length:
            raise ValueError("too long")
        positions = torch.arange(n, device=idx.device).unsqueeze(0).expand(b, n)  # (b, n)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        x = functools.reduce(lambda h, block: block(h), self.blocks, x)
        return self.head(self.final_norm(x))
'''

STYLES = {"position-buffer": POSITION_BUFFER, "functional": FUNCTIONAL, "batched-positions": BATCHED_POSITIONS}

# Wrong in ways the variants do not show, each with the check that must
# catch it: positions counted from the end of the context, tying by a copy
# through .data, positions created on the CPU, no ValueError.
REFERENCE_SOURCE = (REPO_ROOT / "solutions" / "12_gpt" / "gpt.py").read_text()
WRONG = {
    "positions-from-the-end": (
        REFERENCE_SOURCE.replace("positions = torch.arange(n, device=idx.device)",
                                 "positions = torch.arange(self.context_length - n, self.context_length, device=idx.device)"),
        "12-short-inputs"),
    "tie-by-data-copy": (
        REFERENCE_SOURCE.replace("self.head.weight = self.tok_emb.weight",
                                 "self.head.weight.data.copy_(self.tok_emb.weight.data)"),
        "12-tying"),
    "positions-without-device": (
        REFERENCE_SOURCE.replace("positions = torch.arange(n, device=idx.device)", "positions = torch.arange(n)"),
        "12-device"),
    "no-value-error": (
        REFERENCE_SOURCE.replace("raise ValueError(", "print("), "12-too-long"),
}

PLAN = CheckPlan.build(checks.CHECKS)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    course = load_course(check_files=False)
    exercise = course.exercise("12")
    folder = assemble(exercise, source.encode(), tmp_path_factory.mktemp(name), course, REPO_ROOT)
    return load_module(folder, exercise.module)


def _run(module: ModuleType, check_id: str) -> list[object]:
    values = []
    for call in PLAN.calls[PLAN.slices[check_id]]:
        probe_module, function = call.probe.split(":")
        try:
            values.append(getattr(importlib.import_module(probe_module), function)(module, **call.kwargs))
        except Exception as exc:  # noqa: BLE001 - a wrong solution may raise: that is its result
            values.append(exc)
    return values


def _passes(check, got: list[object], want: list[object]) -> bool:
    return all(not isinstance(g, Exception) and check.compare(g, w) is None for g, w in zip(got, want, strict=True))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE_SOURCE, tmp_path_factory, "ref")


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, list[object]]:
    results = {check.id: _run(reference, check.id) for check in checks.CHECKS}
    assert not [cid for cid, values in results.items() if any(isinstance(v, Exception) for v in values)]
    return results


@pytest.mark.parametrize("style", STYLES)
def test_correct_solutions_written_differently_pass_every_check(style, expected, tmp_path_factory):
    module = _module(STYLES[style], tmp_path_factory, style)
    failed = [check.id for check in checks.CHECKS if not _passes(check, _run(module, check.id), expected[check.id])]
    assert not failed


@pytest.mark.parametrize("mistake", WRONG)
def test_mistakes_beyond_the_variants_fail_their_check(mistake, expected, tmp_path_factory):
    source, check_id = WRONG[mistake]
    assert source != REFERENCE_SOURCE
    module = _module(source, tmp_path_factory, mistake)
    check = next(c for c in checks.CHECKS if c.id == check_id)
    assert not _passes(check, _run(module, check_id), expected[check_id])


def test_plan_is_deterministic():
    again = CheckPlan.build(checks.CHECKS)
    assert [c.probe for c in PLAN.calls] == [c.probe for c in again.calls]
    assert all(same(a.kwargs, b.kwargs) for a, b in zip(PLAN.calls, again.calls))


def test_hidden_inputs_cover_what_the_checks_claim():
    full = [c.kwargs for c in PLAN.calls[PLAN.slices["12-logits"]]]
    assert any(k["idx"].size(0) == 1 for k in full)
    assert all(k["idx"].size(1) == k["config"]["context_length"] for k in full)
    assert {k["config"]["tie_weights"] for k in full} == {True, False}
    assert {k["config"]["qkv_bias"] for k in full} == {True, False}
    assert len({k["config"]["num_heads"] for k in full}) >= 3
    assert len({k["config"]["num_layers"] for k in full}) >= 2
    short = [c.kwargs for c in PLAN.calls[PLAN.slices["12-short-inputs"]]]
    assert all(k["idx"].size(1) < k["config"]["context_length"] for k in short)
    blocks = [c.kwargs for c in PLAN.calls[PLAN.slices["12-block"]]]
    assert any(k["x"].size(1) < k["config"]["context_length"] for k in blocks)
    tying = [c.kwargs["config"]["tie_weights"] for c in PLAN.calls[PLAN.slices["12-tying"]]]
    assert True in tying and False in tying


def test_the_oracle_is_the_reference(reference):
    # The public tests' oracle (PyTorch's pre-norm layer) and the reference agree,
    # and the oracle's arrangements for naming mistakes really are other blocks.
    config = {"vocab_size": 9, "context_length": 5, "d_model": 6, "num_heads": 2, "num_layers": 2, "qkv_bias": True}
    idx = torch.randint(0, 9, (2, 4), generator=torch.Generator().manual_seed(0))
    got = probes.logits(reference, config, 3, idx)["logits"]
    assert torch.allclose(got, probes.oracle_logits(config, probes.gpt_weights(config, 3), idx), atol=1e-5)
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1))
    block = {"d_model": 6, "num_heads": 2, "context_length": 5, "qkv_bias": True}
    weights = probes.block_weights(block, 4)
    outs = {a: probes.oracle_block(block, weights, x, a) for a in ("pre-norm", "post-norm", "residual-after-norm")}
    assert torch.allclose(probes.block_output(reference, block, 4, x)["output"], outs["pre-norm"], atol=1e-5)
    assert not torch.allclose(outs["pre-norm"], outs["post-norm"], atol=1e-3)
    assert not torch.allclose(outs["post-norm"], outs["residual-after-norm"], atol=1e-3)


def _readme_examples(name: str) -> str:
    text = (REPO_ROOT / "exercises" / "12_gpt" / name).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return "\n".join(block for block in blocks if ">>>" in block)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_worked_example_is_what_the_reference_computes(readme, reference):
    examples = _readme_examples(readme)
    assert examples.count(">>>") >= 8
    test = doctest.DocTestParser().get_doctest(examples, {"torch": torch, "GPT": reference.GPT}, readme, readme, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)


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
