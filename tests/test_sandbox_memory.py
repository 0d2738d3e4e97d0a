"""Memory measured from outside (exercise 15's memory check): around each
call sent in a batch of its own, the sandbox resets the child's peak
resident memory (/proc/PID/clear_refs) and reads it back afterwards
(VmHWM), on the grader's side (CallResult.rss_before, .peak_rss). A call
that allocates a large tensor is seen even when it frees it before
answering, and nothing the child says or does to /proc changes the figure."""
from __future__ import annotations

import pytest

from grader.sandbox import Limits, Sandbox
from grader.sandbox.model import CallResult
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=20, cpu_s=15, memory_mb=2048, output_limit_kb=16, threads=1)
MIB = 1 << 20

SOURCE = '''
import torch

def allocate(mib):
    big = torch.ones(mib << 18)      # float32: mib MiB, every page touched
    total = float(big[::4096].sum())
    del big                          # freed before the answer: the peak stays
    return total

def small():
    return float(torch.ones(16).sum())

def lie(mib):
    """Allocate, then try to hide it: reset its own peak through /proc and
    claim to have used nothing."""
    allocate(mib)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = "reset"
    except OSError as exc:
        reset = type(exc).__name__
    return {"peak_rss": 0, "rss_before": 0, "reset": reset}
'''


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


def test_a_large_allocation_is_seen_from_outside(sandbox, tmp_path):
    calls = [selftest_call("small"), selftest_call("allocate", 200), selftest_call("small")]
    run = sandbox.run(submission_folder(tmp_path, SOURCE), "submission", calls, [1, 1, 1])
    assert run.status == "ok", run.reason
    before, big, after = (call.peak_growth for call in run.calls)
    assert big >= 190 * MIB, big
    assert before < 50 * MIB and after < 50 * MIB, (before, after)   # the peak was reset for each call


def test_a_child_cannot_hide_or_forge_its_memory(sandbox, tmp_path):
    run = sandbox.run(submission_folder(tmp_path, SOURCE), "submission", [selftest_call("lie", 200)], [1])
    assert run.status == "ok", run.reason
    call = run.calls[0]
    assert call.value["reset"] != "reset", "the child could reach /proc/self/clear_refs"
    assert call.peak_growth >= 190 * MIB, call.peak_growth     # its own words changed nothing
    assert call.rss_before > 0 and call.peak_rss > call.rss_before


def test_calls_that_share_a_batch_get_no_memory_figure(sandbox, tmp_path):
    run = sandbox.run(submission_folder(tmp_path, SOURCE), "submission",
                      [selftest_call("small"), selftest_call("small")], [2])
    assert run.status == "ok", run.reason
    assert [call.peak_growth for call in run.calls] == [None, None]


def test_peak_growth_needs_both_readings():
    assert CallResult(ok=True, rss_before=10, peak_rss=25).peak_growth == 15
    assert CallResult(ok=True, rss_before=10).peak_growth is None
