"""Unit tests for exercise 06's hidden checks, in-process (no sandbox): the
hidden inputs are reproducible and few, every probe call runs on the
reference, and a correct solution written differently from the reference
(layers created in another order, einsum, a hand-written softmax, permute
and contiguous().view) passes every check."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from grader.checks import CheckPlan
from grader.checks.multihead import CHECKS, _close
from grader.course import REPO_ROOT
from probecalls import run_probe, same

SOLUTION = REPO_ROOT / "solutions" / "06_multihead" / "multihead.py"
GIVEN = REPO_ROOT / "exercises" / "06_multihead" / "causal_attention.py"  # shipped beside the module

ANOTHER_CORRECT_SOLUTION = '''
import torch
from torch import nn

from causal_attention import CausalAttention


def split_heads(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError("indivisible")
    return x.view(b, n, num_heads, d // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    b, h, n, hd = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(b, n, h * hd)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(num_heads):
            self.heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))

    def forward(self, x):
        return torch.cat(tuple(head(x) for head in self.heads), dim=2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("indivisible")
        self.h = num_heads
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        n = x.shape[1]
        if n > self.mask.shape[0]:
            raise ValueError("too long")
        q, k, v = (split_heads(layer(x), self.h) for layer in (self.W_query, self.W_key, self.W_value))
        scores = torch.einsum("bhqd,bhkd->bhqk", q * q.shape[-1] ** -0.5, k)
        scores = torch.where(self.mask[:n, :n], float("-inf"), scores)
        weights = (scores - scores.amax(-1, keepdim=True)).exp()
        weights = self.dropout(weights / weights.sum(-1, keepdim=True))
        return self.out_proj(merge_heads(torch.einsum("bhqk,bhkd->bhqd", weights, v)))
'''


def _load(folder: Path, source: str) -> ModuleType:
    folder.mkdir()
    shutil.copy(GIVEN, folder)
    (folder / "multihead.py").write_text(source, encoding="utf-8")
    return load_module(folder, "multihead.py")


@pytest.fixture(scope="module")
def plan() -> CheckPlan:
    return CheckPlan.build(CHECKS)


def test_hidden_inputs_are_reproducible_and_few(plan: CheckPlan) -> None:
    again = CheckPlan.build(CHECKS)
    assert len(plan.calls) <= 85  # a few dozen small calls per submission
    assert all(a.probe == b.probe and same(a.kwargs, b.kwargs) for a, b in zip(plan.calls, again.calls))


def test_every_call_runs_on_the_reference_and_agrees_with_itself(plan: CheckPlan, tmp_path: Path) -> None:
    reference = _load(tmp_path / "reference", SOLUTION.read_text(encoding="utf-8"))
    for check in plan.checks:
        for call in plan.calls[plan.slices[check.id]]:
            value = run_probe(reference, call)
            assert check.compare(value, value) is None, check.id


# The functional dropout, with training=self.training, is correct too.
FUNCTIONAL_DROPOUT = ANOTHER_CORRECT_SOLUTION.replace(
    "self.dropout(weights / weights.sum(-1, keepdim=True))",
    "nn.functional.dropout(weights / weights.sum(-1, keepdim=True), self.dropout.p, self.training)")


# Dropout under a name bound at import time, and torch's own dropout: the
# fixed-dropout probe sees them at the dispatcher, like nn.Dropout.
ALIASED_DROPOUT = "from torch.nn.functional import dropout as drop\n" + FUNCTIONAL_DROPOUT.replace(
    "nn.functional.dropout(", "drop(")
TORCH_DROPOUT = FUNCTIONAL_DROPOUT.replace("nn.functional.dropout(", "torch.dropout(")


@pytest.mark.parametrize("source", [ANOTHER_CORRECT_SOLUTION, FUNCTIONAL_DROPOUT, ALIASED_DROPOUT, TORCH_DROPOUT],
                         ids=["einsum", "functional", "aliased-import", "torch-dropout"])
def test_a_differently_written_correct_solution_passes_every_check(plan: CheckPlan, tmp_path: Path,
                                                                    source: str) -> None:
    assert FUNCTIONAL_DROPOUT != ANOTHER_CORRECT_SOLUTION  # the replacements found their text
    assert "drop(weights" in ALIASED_DROPOUT and "torch.dropout(weights" in TORCH_DROPOUT
    reference = _load(tmp_path / "reference", SOLUTION.read_text(encoding="utf-8"))
    expected = [run_probe(reference, call) for call in plan.calls]
    other = _load(tmp_path / "other", source)
    for check in plan.checks:
        for index in range(plan.slices[check.id].start, plan.slices[check.id].stop):
            assert check.compare(run_probe(other, plan.calls[index]), expected[index]) is None, check.id


def test_missing_outputs_must_be_missing_on_both_sides() -> None:
    compare, t = _close("output"), torch.ones(2)
    assert compare({"output": None}, {"output": None}) is None
    assert compare({"output": t}, {"output": t.clone()}) is None
    assert compare({"output": None}, {"output": t}) is not None
    assert compare({"output": t}, {"output": None}) is not None
    assert compare({"output": [1.0, 1.0]}, {"output": t}) is not None
