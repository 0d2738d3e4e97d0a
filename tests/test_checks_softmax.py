"""Exercise 01's "no built-in softmax" rule, in parts: the kernel recorder
(coursekit.probes.dispatch) on code that reaches a softmax kernel by any
name and on legitimate code that must not be flagged; the grader's verdict
on what the recorder returns, forged forms included; and the static scan
the grader runs on the collected bytes (coding lines, look-ups, names that
reach into the probes). End to end: tests/redteam/test_forbidden.py."""
from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

from coursekit.probes.dispatch import (FUSED_ATTENTION, SOFTMAX, all_ops, base_name, canary, forbidden_kernels,
                                       recorded, recording)
from coursekit.probes.source import decode, scan, uses_in
from grader.checks.forbidden import kernel_rule, source_rule

FAMILIES = (SOFTMAX, FUSED_ATTENTION)
NEG_INF = float("-inf")


def _manual(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _through_logsumexp(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


def _sdpa_weights(x, dim=-1):
    last = x.movedim(dim, -1)
    n = last.shape[-1]
    rows = last.reshape(-1, 1, n)
    weights = F.scaled_dot_product_attention(x.new_zeros(rows.shape[0], 1, 1), x.new_zeros(rows.shape[0], n, 1),
                                             torch.eye(n, dtype=x.dtype).expand(rows.shape[0], n, n), attn_mask=rows)
    return weights.reshape(last.shape).movedim(-1, dim)


def _dispatch_off(x, dim=-1):
    with torch._C._DisableTorchDispatch():
        return torch.special.softmax(x, dim)


BUILT_INS = {
    "torch.softmax": lambda x, dim=-1: torch.softmax(x, dim),
    "computed name": lambda x, dim=-1: getattr(torch, "soft" + "max")(x, dim),
    "private alias": lambda x, dim=-1: torch._C._special.special_softmax(x, dim),
    "log_softmax then exp": lambda x, dim=-1: F.log_softmax(x, dim).exp(),
    "Tensor method by look-up": lambda x, dim=-1: getattr(torch.Tensor, "".join(["soft", "max"]))(x, dim),
    "torch.ops.aten._softmax": lambda x, dim=-1: torch.ops.aten._softmax(x, dim, False),
    "nn.Softmax": lambda x, dim=-1: torch.nn.Softmax(dim)(x),
    "scaled_dot_product_attention": _sdpa_weights,
    "python dispatch switched off": _dispatch_off,
}
LEGITIMATE = {"exp, amax and sum": _manual, "logsumexp": _through_logsumexp}


def _module(fn) -> types.ModuleType:
    module = types.ModuleType("student")
    module.softmax = fn
    return module


def _cases() -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=gen)
    return [{"x": x}, {"x": x, "dim": 0}, {"x": torch.randn(2, 3, 4, generator=gen, dtype=torch.float64), "dim": 1}]


def _ran(fn) -> list[str]:
    """Every kernel ``fn`` runs, forward and backward, as the grader records it."""
    module = _module(fn)
    forward = recorded(module, "coursekit.probes.softmax:softmax_output", _cases())
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    backward = recorded(module, "coursekit.probes.softmax:softmax_gradient", [{"x": x, "upstream": torch.ones(3, 5)}])
    assert forward["raised"] == backward["raised"] == 0
    return [*all_ops(forward), *all_ops(backward)]


@pytest.mark.parametrize("name", BUILT_INS)
def test_a_softmax_kernel_is_seen_whatever_name_reached_it(name):
    assert torch.allclose(BUILT_INS[name](torch.tensor([1.0, 2.0, 3.0])), torch.softmax(torch.tensor([1.0, 2.0, 3.0]), -1))
    assert forbidden_kernels(_ran(BUILT_INS[name]), FAMILIES), name


@pytest.mark.parametrize("name", LEGITIMATE)
def test_legitimate_code_runs_no_forbidden_kernel(name):
    ran = _ran(LEGITIMATE[name])
    assert "aten::exp" in ran and forbidden_kernels(ran, FAMILIES) == []


def test_backward_kernels_are_recorded_too():
    class OnlyBackward(torch.autograd.Function):
        """Manual forward, built-in softmax backward: only the backward is forbidden."""

        @staticmethod
        def forward(ctx, x):
            out = _manual(x)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            return torch.ops.aten._softmax_backward_data(grad, out, -1, out.dtype)

    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(2))
    found = recorded(_module(lambda x, dim=-1: OnlyBackward.apply(x)), "coursekit.probes.softmax:softmax_gradient",
                     [{"x": x, "upstream": torch.ones(3, 5)}])
    assert forbidden_kernels(all_ops(found), [SOFTMAX]) == ["aten::_softmax_backward_data"]


def test_a_case_that_raises_is_counted_and_a_stub_propagates():
    def crashes_on_vectors(x, dim=-1):
        if x.dim() == 1:
            raise ValueError("no vectors")
        return _manual(x, dim)

    found = recorded(_module(crashes_on_vectors), "coursekit.probes.softmax:softmax_output",
                     [{"x": torch.ones(3)}, {"x": torch.ones(2, 3)}])
    assert found["raised"] == 1 and "aten::exp" in all_ops(found)

    def stub(x, dim=-1):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        recorded(_module(stub), "coursekit.probes.softmax:softmax_output", [{"x": torch.ones(3)}])


def test_only_probes_of_the_library_can_be_recorded():
    with pytest.raises(ValueError):
        recorded(_module(_manual), "os:system", [{}])


def test_operator_names_are_matched_by_their_base_name():
    assert base_name("aten::_softmax.default") == "_softmax" == base_name("aten._softmax.default")
    assert forbidden_kernels(["aten::_safe_softmax", "aten::logsumexp", "aten::exp"], [SOFTMAX]) == ["aten::_safe_softmax"]
    assert forbidden_kernels(["aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_fused_sdp_choice",
                              "aten::bmm"], [FUSED_ATTENTION]) == ["aten::_fused_sdp_choice",
                                                                   "aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert forbidden_kernels(["aten::softmax"], [FUSED_ATTENTION]) == []


def test_the_canary_shows_both_families():
    with recording() as found:
        canary(_module(None))
    assert {SOFTMAX, FUSED_ATTENTION} == {f for f in FAMILIES if forbidden_kernels(all_ops(found), [f])}


def _record(*names: str, raised: int = 0) -> dict:
    return {"dispatch": list(names), "profiler": list(names), "raised": raised}


def test_the_verdict_is_judged_against_the_reference_recording():
    rule = kernel_rule(FAMILIES)
    clean, canary_seen = _record("aten::exp", "aten::sum"), _record("aten::_softmax", "aten::_safe_softmax")
    assert rule(clean, clean) is None and rule(canary_seen, canary_seen) is None
    assert "kernel ran" in rule(_record("aten::exp", "aten::_softmax"), clean)
    # A recorder taught to leave softmax out fails the canary.
    assert "could not be recorded" in rule(clean, canary_seen)


@pytest.mark.parametrize("forged", [None, [], "aten::exp", {"dispatch": [], "profiler": ["aten::exp"]},
                                    {"dispatch": ["aten::exp"]}, {"dispatch": [1], "profiler": [2]},
                                    {"profiler": "aten::exp"}])
def test_a_recording_of_any_other_form_fails(forged):
    assert all_ops(forged) is None
    assert "could not be recorded" in kernel_rule(FAMILIES)(forged, _record("aten::exp"))


def test_a_recording_is_judged_the_same_the_second_time_and_a_large_one_is_not_kept():
    from grader.checks.forbidden import _judged_recording

    rule, builtin, clean = kernel_rule(FAMILIES), _record("aten::exp", "aten::_softmax"), _record("aten::exp")
    assert "kernel ran" in rule(builtin, clean) and "kernel ran" in rule(dict(builtin), clean)
    kept = _judged_recording.cache_info().currsize
    large = _record("aten::exp", "aten::_softmax", *(f"aten::{'x' * 1000}{i}" for i in range(40)))
    assert "kernel ran" in rule(large, clean)
    assert _judged_recording.cache_info().currsize == kept


def test_an_empty_recording_passes_only_where_the_reference_ran_nothing_either():
    # A call whose probe only catches an error (a constructor that must
    # raise) runs no operator, for the reference too.
    empty = {"profiler": []}
    assert all_ops(empty) == [] and kernel_rule(FAMILIES)(empty, {"profiler": []}) is None
    assert "could not be recorded" in kernel_rule(FAMILIES)(empty, {"profiler": ["aten::exp"]})


def test_the_verdict_never_repeats_the_recorded_names():
    reason = kernel_rule(FAMILIES)(_record("aten::exp", "aten::_softmax_secret_0_5"), _record("aten::exp"))
    assert "secret" not in reason and "aten::" not in reason


# --- the static scan, in the grader's process ------------------------------------

SOFTMAX_NAMES = ["softmax", "Softmax", "log_softmax", "_softmax"]


def test_bytes_are_decoded_as_python_decodes_them():
    assert decode(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"
    assert decode(b"# -*- coding: utf-8 -*-\nx = '\xc3\xa9'\n").endswith("'\u00e9'\n")
    for cookie in (b"# coding: utf-7\n", b"# vim: set fileencoding=latin-1 :\n", b"# coding: cp1252\n"):
        with pytest.raises(ValueError, match="other than UTF-8"):
            decode(cookie + b"x = 1\n")
    with pytest.raises(ValueError, match="does not know"):
        decode(b"# coding: no-such-codec\nx = 1\n")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        decode(b"x = '\xff'\n")


def test_a_utf7_coding_line_is_refused_whatever_it_hides():
    hidden = "\n    return torch.softmax(x, dim)".encode("utf-16-be")
    import base64

    data = (b"# coding: utf-7\nimport torch\ndef softmax(x, dim=-1):\n    #+"
            + base64.b64encode(hidden).rstrip(b"=") + b"-\n")
    assert "softmax(x, dim)" in data.decode("utf-7") and b"torch.softmax" not in data
    assert "other than UTF-8" in scan(data, SOFTMAX_NAMES).refused
    assert "other than UTF-8" in source_rule("01")(data)


@pytest.mark.parametrize("line", [
    "y = torch.softmax(x, -1)", "y = x.softmax(-1)", "from torch.nn.functional import softmax as s",
    "import torch.nn.functional.softmax", "y = getattr(torch, 'softmax')(x)", "y = torch.ops.aten._softmax(x, -1, False)",
    "y = torch.nn.Softmax(-1)(x)", "y = x.__getattribute__('log_softmax')(-1)",
])
def test_uses_of_forbidden_names_are_found(line):
    assert [use["line"] for use in uses_in(f"import torch\n{line}\n", SOFTMAX_NAMES)] == [2]


def test_the_students_own_softmax_is_not_a_use():
    source = b"import torch\n__all__ = ['softmax']\n\ndef softmax(x, dim=-1):\n    return x.exp() / x.exp().sum(dim)\n"
    assert scan(source, SOFTMAX_NAMES).uses == [] and source_rule("01")(source) is None


@pytest.mark.parametrize("line", [
    "import coursekit.probes.source as s", "f.__code__ = g.__code__", "torch._C._DisableTorchDispatch()",
    "from torch.utils import _python_dispatch", "getattr(f, '__globals__')",
])
def test_reaching_into_the_probes_fails_the_rule(line):
    reason = source_rule("01")(f"import torch\n{line}\n".encode())
    assert reason == "reaches into the grader's probes or Python's innards on line 2"


def test_the_rule_names_lines_never_the_students_text():
    reason = source_rule("01")(b"import torch\nsecret = 1; y = torch.softmax(x, -1)\n")
    assert reason == "uses a forbidden built-in on line 2 (see the exercise README)"
    assert source_rule("01")(b"def softmax(x:\n") == "the module does not parse as Python"


def test_an_observed_check_records_every_call_and_judges_values_first():
    from grader.checks.forbidden import observed
    from grader.checks.softmax import CHECKS

    check = next(c for c in CHECKS if c.id == "01-large-scores")
    calls = check.build_calls()
    assert calls and all(c.probe == "coursekit.probes.dispatch:recorded_call" for c in calls)
    x = torch.tensor([[1.0, 2.0, 3.0]])
    results = {name: recorded_call_of(fn, x) for name, fn in [("manual", _manual), ("builtin", BUILT_INS["computed name"])]}
    assert check.compare(results["manual"], results["manual"]) is None
    assert "kernel ran" in check.compare(results["builtin"], results["manual"])
    wrong = {"value": {"output": x, "input_unchanged": True}, "ops": results["builtin"]["ops"]}
    assert check.compare(wrong, results["manual"]) == "wrong values"
    assert observed(check, FAMILIES).compare("not a dict", results["manual"]) == "returned a result of an unexpected form"


def recorded_call_of(fn, x):
    from coursekit.probes.dispatch import recorded_call

    return recorded_call(_module(fn), "coursekit.probes.softmax:softmax_output", {"x": x})


def test_a_call_the_recorder_could_not_start_on_is_kept_unrecorded():
    # A profiler already on (the module's own session) makes switching ours
    # on fail: the call raises, and what it keeps is no recording at all,
    # which the no-forbidden-calls check judges unrecorded, never clean.
    from coursekit.probes import dispatch
    from grader.checks.forbidden import _kernels_recorded

    module = _module(_manual)
    dispatch._ENABLE(dispatch._CPU_ONLY)
    try:
        with pytest.raises(RuntimeError):
            dispatch.recorded_call(module, "coursekit.probes.softmax:softmax_output", {"x": torch.ones(2, 3)})
    finally:
        dispatch._DISABLE()
    assert dispatch.raised_recordings(module) == [{}]
    assert _kernels_recorded({}, (SOFTMAX,)) is None


def test_a_call_that_raises_keeps_what_it_ran_for_the_raised_recordings():
    from coursekit.probes import dispatch

    def builtin_then_raise(x, dim=-1):
        torch.softmax(x, dim)
        raise ValueError("no")

    module, other = _module(builtin_then_raise), _module(builtin_then_raise)
    with pytest.raises(ValueError):
        dispatch.recorded_call(module, "coursekit.probes.softmax:softmax_output", {"x": torch.ones(2, 3)})
    recorded_call_of(_manual, torch.ones(2, 3))  # a call that returns adds nothing
    (kept,) = dispatch.raised_recordings(module)
    assert forbidden_kernels(all_ops(kept), [SOFTMAX])
    kept["profiler"].clear()  # a copy: what the caller does to it changes nothing kept
    assert forbidden_kernels(all_ops(dispatch.raised_recordings(module)[0]), [SOFTMAX])
    assert dispatch.raised_recordings(other) == []  # another module's run (an in-process runner) sees none
    assert not hasattr(dispatch, "_RAISED")


def _observed_run(values_by_index: dict[int, object], raised: set[int] = frozenset()):
    """The 01 plan, a run whose calls all return the reference's recording
    except those given (a value, or an error for an index in ``raised``)."""
    from grader.checks import CheckPlan
    from grader.checks.softmax import CHECKS
    from grader.sandbox import CallResult, RunResult

    plan = CheckPlan.build(CHECKS)
    clean = recorded_call_of(_manual, torch.ones(2, 3))
    reference = RunResult("ok", [CallResult(True, [] if c.probe.endswith(":raised_recordings") else clean)
                                 for c in plan.calls], "", "", "", 0.0)
    values_by_index = {len(plan.calls) - 1: [], **values_by_index}
    calls = [CallResult(False, error_type="ValueError", error="no") if i in raised
             else CallResult(True, values_by_index.get(i, clean)) for i in range(len(plan.calls))]
    return plan, RunResult("ok", calls, "", "", "", 0.0), reference


def test_the_no_forbidden_calls_check_judges_every_observed_call_of_every_check():
    """Not only the calls of the check it names: a built-in run only on the
    inputs of another check (those with -inf entries, say) fails it too."""
    from grader.checks.forbidden import kernels_in_observed_calls
    from grader.sandbox import CallResult

    rule = kernels_in_observed_calls(FAMILIES)
    plan, run, reference = _observed_run({})
    assert rule(plan.calls, run, reference) is None
    blocked = plan.slices["01-fully-blocked-rows"].start + 1
    builtin = recorded_call_of(BUILT_INS["computed name"], torch.ones(2, 3))
    plan, run, reference = _observed_run({blocked: builtin})
    assert "kernel ran" in rule(plan.calls, run, reference)
    last = len(plan.calls) - 1  # raised_recordings: one recording per observed call that raised
    plan, run, reference = _observed_run({last: [{"profiler": []}]}, raised={blocked})  # judged there
    assert rule(plan.calls, run, reference) is None
    plan, run, reference = _observed_run({last: []}, raised={blocked})  # code that emptied the store
    assert rule(plan.calls, run, reference) == "the operators your code ran could not be recorded"
    plan, run, reference = _observed_run({})  # a result the child could not send: its recording is lost
    run.calls[blocked] = CallResult(False, error_type="ProtocolError", error="not plain data")
    assert rule(plan.calls, run, reference) == "the operators your code ran could not be recorded"
    tampered = {"value": builtin["value"], "ops": {"profiler": [], "dispatch": ["aten::exp"]}}
    plan, run, reference = _observed_run({blocked: tampered})
    assert rule(plan.calls, run, reference) == "the operators your code ran could not be recorded"


def test_the_raised_calls_recordings_are_judged_like_any_other():
    from grader.checks.forbidden import failed_calls_rule

    compare = failed_calls_rule(FAMILIES)
    clean, builtin = ({"profiler": ops} for ops in (["aten::exp"], ["aten::_softmax", "aten::softmax"]))
    assert compare([], []) is None and compare([clean], []) is None
    assert "kernel ran" in compare([clean, builtin], [])
    assert compare("forged", []) == compare([{"dispatch": []}], []) == "the operators your code ran could not be recorded"


def test_a_check_with_a_run_rule_makes_its_calls_after_every_other_check():
    from grader.checks import CheckPlan
    from grader.checks.softmax import CHECKS

    plan = CheckPlan.build(CHECKS)
    rule_checks = [c.id for c in CHECKS if c.run_rule is not None]
    assert rule_checks == ["01-no-forbidden-calls"]
    assert plan.slices[rule_checks[0]].stop == len(plan.calls)
    assert plan.calls[-1].probe == "coursekit.probes.dispatch:raised_recordings"
    moved = CheckPlan.build([CHECKS[-1], *CHECKS[:-1]])  # listed first: still run last
    assert moved.slices[rule_checks[0]].stop == len(moved.calls) and [c.id for c in moved.checks][0] == rule_checks[0]
