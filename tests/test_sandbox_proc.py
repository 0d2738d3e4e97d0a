"""Work measured from outside (issue 36): the sandbox reads the child's CPU
time from /proc around each call sent in a batch of its own and records it
beside the call's result (CallResult.cpu_s), on the grader's side. Nothing
the child does hides work from it: work in a thread that ends before the
answer counts, and the child cannot write the figure."""
from __future__ import annotations

import pytest

from grader.sandbox import Limits, Sandbox, proc
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=20, cpu_s=15, memory_mb=2048, output_limit_kb=16, threads=1)

SOURCE = '''
import threading, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "burnt"

def idle():
    return "idle"

def burn_in_a_thread_that_ends(seconds):
    worker = threading.Thread(target=burn, args=(seconds,))
    worker.start()
    worker.join()
    return "burnt"
'''


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


def test_each_call_alone_gets_the_cpu_time_it_used(sandbox, tmp_path):
    calls = [selftest_call("idle"), selftest_call("burn", 0.4), selftest_call("burn_in_a_thread_that_ends", 0.4),
             selftest_call("idle")]
    run = sandbox.run(submission_folder(tmp_path, SOURCE), "submission", calls, [1, 1, 1, 1])
    assert run.status == "ok", run.reason
    idle, burnt, threaded, idle_again = (call.cpu_s for call in run.calls)
    assert burnt >= 0.35 and threaded >= 0.35, (burnt, threaded)   # a thread's work counts after it ended
    assert idle < 0.1 and idle_again < 0.1, (idle, idle_again)


def test_calls_that_share_a_batch_get_no_figure(sandbox, tmp_path):
    run = sandbox.run(submission_folder(tmp_path, SOURCE), "submission",
                      [selftest_call("burn", 0.1), selftest_call("idle")], [2])
    assert run.status == "ok", run.reason
    assert [call.cpu_s for call in run.calls] == [None, None]


def test_the_larger_of_the_two_readings_counts():
    tick = 1 / proc._TICKS
    assert proc.spent((1.0, 1.0), (1.5, 1.2)) == pytest.approx(0.5)   # fine
    # A thread ended: the coarse reading counts, less the one tick its cut to whole ticks may add.
    assert proc.spent((1.0, 1.0), (1.1, 1.6)) == pytest.approx(0.6 - tick)
    # A single-threaded call of 12 ms whose coarse readings crossed two tick boundaries: the fine figure.
    assert proc.spent((1.0, 1.0), (1.012, 1.0 + 2 * tick)) == pytest.approx(0.012)
    assert proc.spent(None, (1.0, 1.0)) is None
