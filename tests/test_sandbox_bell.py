"""The result pipe's bell (grader/sandbox/child.py): the child writes each
result as its call ends, and the grader reads the pipe when the child rings
before waiting for the next batch: one wake-up per batch, not per call. What
per-call reading promised still holds: a limit keeps every finished call's
result and names the call that ran, results larger than the pipe do not
deadlock, and a child whose code closes or abuses the bell is ended as
tampered, not waited for."""
from __future__ import annotations


import pytest

from grader.sandbox import Limits, Sandbox, runstate
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=8, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=1)

SOURCE = '''
import os, time, torch

def echo(x):
    return x

def big(n):
    return torch.arange(n, dtype=torch.float64)

def nap():
    time.sleep(600)

def chatter():
    for word in (b"s", b"w", b"garbage", b"s"):
        try:
            os.write(5, word)
        except OSError:  # closed at import
            pass
    return "rang"

def talk():
    print("x" * 100)
    return "talked"
'''


call, module = selftest_call, submission_folder
@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


@pytest.fixture
def reads(monkeypatch):
    """How many times the grader read data from a result pipe."""
    count = [0]
    take = runstate.RunState._take_results

    def counted(self, data):
        count[0] += bool(data)
        return take(self, data)

    monkeypatch.setattr(runstate.RunState, "_take_results", counted)
    return count


def test_a_batch_of_quick_calls_wakes_the_grader_once(sandbox, tmp_path, reads):
    result = sandbox.run(module(tmp_path, SOURCE), "submission", [call("echo", i) for i in range(40)], [20, 20])
    assert result.status == "ok", result.reason
    assert [c.value for c in result.calls] == list(range(40))
    # The layers and the import, then each batch: 3 reads, not 40-odd (a read
    # may catch a frame half-written, hence a little room).
    assert reads[0] <= 6, reads[0]


def test_results_larger_than_the_pipe_stream_without_a_deadlock(sandbox, tmp_path):
    n = 64 * 1024  # 512 KiB of float64 per call: each is more than the pipe holds
    result = sandbox.run(module(tmp_path, SOURCE), "submission", [call("big", n)] * 4 + [call("echo", 7)], [5])
    assert result.status == "ok", result.reason
    assert [c.value.numel() for c in result.calls[:4]] == [n] * 4 and result.calls[4].value == 7


def test_a_hang_keeps_the_finished_calls_of_its_batch_and_names_the_call(tmp_path):
    limits = Limits(timeout_s=2, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=1)
    with Sandbox(limits) as box:
        result = box.run(module(tmp_path, SOURCE), "submission",
                         [call("echo", 1), call("echo", 2), call("nap"), call("echo", 4)], [4])
    assert result.status == "timeout" and "during call 3" in result.reason, result.reason
    assert [c.value for c in result.calls] == [1, 2]


@pytest.mark.parametrize("at_import", ["os.close(5)\n", "os.write(5, b's' * 70000)\n", ""])
def test_a_bell_closed_or_rung_by_the_student_s_code_voids_the_run_without_wedging_the_grader(
        sandbox, tmp_path, at_import):
    """Only the child's sender rings, and only its two words: a bell closed,
    or a word it never says (``chatter``), is the channel touched (issue 36).
    The bytes the child's own words ring (70000 of them) change nothing."""
    source = "import os\n" + at_import + SOURCE
    honest = [call("echo", i) for i in range(10)]
    result = sandbox.run(module(tmp_path, source), "submission", honest, [5, 5])
    if at_import == "os.close(5)\n":
        assert (result.status, result.calls) == ("tampered", []), result.reason
    else:
        assert result.status == "ok" and [c.value for c in result.calls] == list(range(10)), result.reason
    result = sandbox.run(module(tmp_path, source), "submission", [*honest, call("chatter"), call("echo", 11)], [5, 5, 2])
    assert (result.status, result.calls) == ("tampered", []), result.reason


def test_a_bell_rung_without_end_ends_the_run_instead_of_keeping_the_grader_busy(sandbox, tmp_path):
    """Each ring wakes the grader: a child that floods the bell is cut off as
    one that floods its output is, long before its time is up."""
    source = "import os\ndef ring():\n    while True:\n        os.write(5, b'w' * 65536)\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("ring")])
    assert result.status == "tampered" and "bell" in result.reason, result.reason  # not "timeout"
