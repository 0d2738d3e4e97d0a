"""The hidden checks of exercise 15, run in-process (no sandbox): the
reference equals exercise 03's attention and its gradients on every hidden
input (float64, 1e-9), the hidden inputs cover what the checks claim, a
correct solution written unlike the reference (all queries against one key
block at a time) passes, and the memory rule judges the figures the
sandbox measures (tests/test_sandbox_memory.py measures them) as its
docstring says. ``grader check 15`` covers the reference, the stub and the
pitfall variants through the sandbox, memory included."""
from __future__ import annotations

import importlib
import math
from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from grader.checks import CheckPlan, CouldNotTell
from grader.checks import flash_attention as checks
from grader.checks.forbidden import unwrapped
from grader.checks.memory import MIB, TOO_MUCH_MEMORY, MemoryBudget, peak_memory_within, verdict
from grader.course import REPO_ROOT
from grader.failures import measured_failure
from grader.sandbox import CallResult, ProbeCall, RunResult
from probecalls import exercise_module

PLAN = CheckPlan.build(checks.CHECKS)
REFERENCE = (REPO_ROOT / "solutions" / "15_flash_attention" / "flash_attention.py").read_text()
VALUE_CHECKS = ("15-forward", "15-causal", "15-fully-blocked", "15-gradients", "15-wrapper", "15-input-unchanged")

# A correct solution unlike the reference: one loop over key blocks, all
# queries at once ((n_q, block) scores), the backward in the same loop.
KEY_BLOCKS_ONLY = '''
import math
import torch


def _scores(q, k, start, n_q, n_k, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        i = torch.arange(n_q)[:, None] + n_k - n_q
        j = torch.arange(start, start + k.size(-2))[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return s


def tiled_attention(query, key, value, block_size=64, causal=False):
    n_q, n_k = query.size(-2), key.size(-2)
    m = query.new_full((*query.shape[:-1], 1), float("-inf"))
    l = query.new_zeros((*query.shape[:-1], 1))
    acc = query.new_zeros((*query.shape[:-1], value.size(-1)))
    for start in range(0, n_k, block_size):
        s = _scores(query, key[..., start:start + block_size, :], start, n_q, n_k, causal)
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        p = torch.exp(s - safe)
        scale = torch.exp(m - safe)
        l = l * scale + p.sum(-1, keepdim=True)
        acc = acc * scale + p @ value[..., start:start + block_size, :]
        m = new
    out = torch.where(l > 0, acc / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(acc))
    return out, (m + torch.log(l)).squeeze(-1)


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, block_size):
        o, lse = tiled_attention(q, k, v, block_size, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.block_size = causal, block_size
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        n_q, n_k = q.size(-2), k.size(-2)
        d = (do * o).sum(-1, keepdim=True)
        lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse).unsqueeze(-1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for start in range(0, n_k, ctx.block_size):
            end = start + ctx.block_size
            kb, vb = k[..., start:end, :], v[..., start:end, :]
            p = torch.exp(_scores(q, kb, start, n_q, n_k, ctx.causal) - lse)
            dv[..., start:end, :] = p.transpose(-2, -1) @ do
            ds = p * (do @ vb.transpose(-2, -1) - d) / math.sqrt(q.size(-1))
            dq += ds @ kb
            dk[..., start:end, :] = ds.transpose(-2, -1) @ q
        return dq, dk, dv, None, None


def flash_attention(query, key, value, block_size=64, causal=False):
    return FlashAttention.apply(query, key, value, causal, block_size)
'''


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("15", source, tmp_path_factory.mktemp(name))


def _calls(check_id: str) -> list[ProbeCall]:
    return [unwrapped(call) for call in PLAN.calls[PLAN.slices[check_id]]]


def _run(module: ModuleType, call: ProbeCall) -> object:
    probe_module, function = call.probe.split(":")
    return getattr(importlib.import_module(probe_module), function)(module, **call.kwargs)


def _attention_03(query, key, value, causal):
    """Exercise 03's reference (float64): output, lse and autograd's gradients."""
    folder = REPO_ROOT / "solutions" / "03_masking"
    attention = load_module(folder, "attention").scaled_dot_product_attention
    n_q, n_k = query.size(-2), key.size(-2)
    mask = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1) if causal else None
    output, _ = attention(query, key, value, mask)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    lse = torch.logsumexp(scores if mask is None else scores.masked_fill(mask, -math.inf), dim=-1)
    return output, lse


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _module(REFERENCE, tmp_path_factory, "reference")


@pytest.mark.parametrize("check_id", ["15-forward", "15-causal", "15-fully-blocked"])
def test_the_reference_equals_exercise_03_on_every_hidden_input(reference, check_id):
    for call in _calls(check_id):
        result = _run(reference, call)
        kw = call.kwargs
        output, lse = _attention_03(kw["query"], kw["key"], kw["value"], kw["causal"])
        assert torch.allclose(result["output"], output, atol=1e-12, rtol=0)
        assert torch.equal(torch.isneginf(result["lse"]), torch.isneginf(lse))
        assert torch.allclose(result["lse"], lse, atol=1e-12, rtol=0)


def test_the_reference_gradients_equal_autograd_through_exercise_03(reference):
    for call in _calls("15-gradients"):
        kw = call.kwargs
        result = _run(reference, call)
        q, k, v = (kw[name].clone().requires_grad_(True) for name in ("query", "key", "value"))
        output, _ = _attention_03(q, k, v, kw["causal"])
        grads = torch.autograd.grad(output, (q, k, v), kw["grad_output"])
        for name, grad in zip(("grad_query", "grad_key", "grad_value"), grads):
            assert torch.allclose(result[name], grad, atol=1e-12, rtol=0), name


def test_the_hidden_inputs_cover_what_the_checks_claim():
    forward = _calls("15-forward")
    assert {call.kwargs["query"].dim() for call in forward} == {2, 3, 4}            # (), (b,), (b, h)
    sizes = [(c.kwargs["query"].size(-2), c.kwargs["key"].size(-2), c.kwargs["block_size"]) for c in forward]
    assert any(q == k for q, k, _ in sizes) and any(q < k for q, k, _ in sizes) and any(q > k for q, k, _ in sizes)
    assert any(b == 1 for *_, b in sizes) and any(b > max(q, k) for q, k, b in sizes)
    assert any(max(q, k) % b for q, k, b in sizes if 1 < b < max(q, k))             # a block that does not divide n
    blocked = _calls("15-fully-blocked")
    assert all(c.kwargs["causal"] and c.kwargs["query"].size(-2) > c.kwargs["key"].size(-2) for c in blocked)
    # A query block that mixes queries that see nothing with queries that see keys (NaN shows there).
    assert any(c.kwargs["block_size"] > c.kwargs["query"].size(-2) - c.kwargs["key"].size(-2) for c in blocked)
    assert {c.kwargs["via"] for c in _calls("15-wrapper")} == {"wrapper"}


def test_a_solution_unlike_the_reference_passes(reference, tmp_path_factory):
    other = _module(KEY_BLOCKS_ONLY, tmp_path_factory, "key_blocks_only")
    for check_id in VALUE_CHECKS:
        check = next(c for c in checks.CHECKS if c.id == check_id)
        for call in PLAN.calls[PLAN.slices[check_id]]:      # recorded, as the sandbox runs them
            assert check.compare(_run(other, call), _run(reference, call)) is None, check_id


# --- the memory rule ---------------------------------------------------------------

PROBE = "coursekit.probes.flash_attention:long_sequence"
MATRIX = 64 * MIB
RULE = peak_memory_within([MemoryBudget(PROBE, MATRIX, checks.text("the pass", "计算"))],
                          checks.text("could not tell", "无法判断"))
INPUTS = [ProbeCall("coursekit.probes.flash_attention:forward", {}), ProbeCall(PROBE, {"n": 4096})]


def _runs(growth: int | None, *, before: int = 300 * MIB, reference_growth: int = 2 * MIB,
          reference_before: int = 300 * MIB, error: str | None = None) -> tuple[RunResult, RunResult]:
    def run(call: CallResult) -> RunResult:
        return RunResult("ok", [CallResult(ok=True, value=1), call], "", "", "", 1.0)

    if error:
        mine = CallResult(ok=False, error_type=error, error="")
    else:
        mine = CallResult(ok=True, value=1, rss_before=before, peak_rss=None if growth is None else before + growth)
    ref = CallResult(ok=True, value=1, rss_before=reference_before, peak_rss=reference_before + reference_growth)
    return run(mine), run(ref)


def test_a_tiled_pass_passes_and_a_naive_one_fails_with_the_figures():
    assert RULE(INPUTS, *_runs(8 * MIB)) is None
    reason = RULE(INPUTS, *_runs(280 * MIB))
    assert reason is not None and not isinstance(reason, CouldNotTell)
    assert "peak memory grew by 280 MiB" in reason and "an n×n matrix is 64 MiB" in reason
    assert "a tiled pass needs about 2 MiB" in reason and "峰值内存增加了 280 MiB" in reason
    assert reason.kind == TOO_MUCH_MEMORY      # a fixed signature, whatever the figures


def test_near_the_threshold_it_could_not_tell():
    undecided = RULE(INPUTS, *_runs(45 * MIB))
    assert isinstance(undecided, CouldNotTell)
    assert "grew 45 MiB; the matrix is 64 MiB" in undecided.detail   # the figures, for the instructor's review
    unread = RULE(INPUTS, *_runs(None))                                                   # /proc could not tell
    assert isinstance(unread, CouldNotTell) and "grew ?;" in unread.detail               # not read as 0 MiB
    assert isinstance(RULE(INPUTS, *_runs(8 * MIB, reference_growth=20 * MIB)), CouldNotTell)   # a noisy reference


def test_memory_set_aside_before_the_call_counts():
    # Grown by little, but its peak is 202 MiB above the reference's: a buffer
    # allocated (and touched) at import time, used as the n × n scratch.
    reason = RULE(INPUTS, *_runs(4 * MIB, before=500 * MIB))
    assert reason is not None and "202 MiB above the reference's" in reason
    # So is a freed heap reused: 60 MiB allocated and freed at import (or by an
    # earlier call) stays resident, and a (n, n) scratch grows the peak by nothing.
    assert "82 MiB above the reference's" in RULE(INPUTS, *_runs(4 * MIB, before=380 * MIB))
    # A library imported beside it (matplotlib holds 14 MiB; 20 MiB here) is not that.
    assert RULE(INPUTS, *_runs(4 * MIB, before=320 * MIB)) is None
    assert isinstance(RULE(INPUTS, *_runs(4 * MIB, before=340 * MIB)), CouldNotTell)


def test_running_out_of_memory_is_this_check_failing():
    reason = RULE(INPUTS, *_runs(None, error="MemoryError"))
    assert "ran out of memory" in reason and reason.kind == TOO_MUCH_MEMORY
    assert RULE(INPUTS, *_runs(None, error="ValueError")) is None    # the values' failure says that one
    mine, ref = _runs(None, error="RuntimeError")
    mine.calls[1].error = "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"
    assert "ran out of memory" in RULE(INPUTS, mine, ref)


def test_the_verdicts_thresholds():
    assert verdict(MATRIX // 2 - 1, MATRIX, MIB) == "pass"
    assert verdict(MATRIX // 2, MATRIX, MIB) == "could not tell"
    assert verdict(MATRIX, MATRIX, MIB) == "fail"
    assert verdict(None, MATRIX, MIB) == "could not tell"
    assert verdict(MIB, MATRIX, MATRIX // 4) == "could not tell"   # the reference itself too near


def test_a_variant_failing_the_memory_rule_fails_the_check():
    check = next(c for c in checks.CHECKS if c.id == "15-memory-backward")
    plan_inputs = PLAN.calls
    index = max(i for i, call in enumerate(plan_inputs) if call.probe == PROBE)   # the measured call, after the warm-up
    calls = [CallResult(ok=True, value=1)] * len(plan_inputs)
    variant = RunResult("ok", [*calls[:index], CallResult(ok=True, value=1, rss_before=0, peak_rss=300 * MIB),
                               *calls[index + 1:]], "", "", "", 1.0)
    expected = RunResult("ok", [*calls[:index], CallResult(ok=True, value=1, rss_before=0, peak_rss=MIB),
                                *calls[index + 1:]], "", "", "", 1.0)
    failure = measured_failure(check, plan_inputs, variant, expected)
    assert failure is not None and failure.kind == TOO_MUCH_MEMORY
    assert measured_failure(check, plan_inputs, expected, expected) is None


@pytest.mark.parametrize("seed", [None, 12345])
def test_the_memory_calls_run_first_in_the_child(seed):
    """Right after the import, before any other call: a heap that earlier
    calls freed stays resident and would hide a peak (SECURITY.md)."""
    plan = CheckPlan.build(checks.CHECKS, seed=seed)
    probes = [call.probe.rsplit(":", 1)[1] for call in plan.calls]
    # Each a short call that warms the child up, then the measured one.
    assert probes[:4] == ["long_forward"] * 2 + ["long_sequence"] * 2, probes[:4]
    assert [call.kwargs["n"] for call in plan.calls[:4]] == [checks.WARM_UP_N, checks.MEMORY_N] * 2
    assert "long_forward" not in probes[4:] and "long_sequence" not in probes[4:]
    # Only those: every other check keeps its place (run rules' checks last).
    others = [c.id for c in sorted(checks.CHECKS, key=lambda c: plan.slices[c.id].start) if not c.runs_first]
    assert others[-1] == "15-no-forbidden-calls"
