"""Probe calls sent a batch at a time (issue 19): the judge sends each
check's calls to the child in one frame, one round trip per check instead
of per call. What per-call delivery promised still holds: no input before
the import, each call answered and failing on its own, a limit's report
naming the call that ran, and no call seeing a later batch's inputs."""
from __future__ import annotations


import pytest
import torch

from grader.checks import CheckPlan, checks_for, figures_for
from grader.course import load_course
from grader.judge import check_batches
from grader.sandbox import Limits, Sandbox
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=8, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=1)
FIRST, SECOND = "first-batch-input-51c2", "second-batch-input-9e0d"


call, module = selftest_call, submission_folder
@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


# Which of the two marks the process holds anywhere (the pipe, its objects).
SEEN = '''
import gc, os

def seen():
    marks = {"".join(p) for p in (("first-batch", "-input-51c2"), ("second-batch", "-input-9e0d"))}
    found = set()
    try:
        os.set_blocking(3, False)
        data = os.read(3, 1 << 20).decode("latin-1")
        found |= {m for m in marks if m in data}
    except OSError:
        pass
    finally:
        try:
            os.set_blocking(3, True)
        except OSError:
            pass
    for obj in gc.get_objects():
        if type(obj) in (list, tuple, dict):
            items = obj.values() if type(obj) is dict else obj
            found |= {item for item in items if type(item) is str and item in marks}
    return sorted(found)

AT_IMPORT = seen()

def at_import(*args):
    return AT_IMPORT

def now(*args):
    return seen()

def echo(x):
    return x

def fails(*args):
    raise ValueError("only this call")

def spin(*args):
    while True:
        pass
'''


def test_batched_calls_come_back_in_order_each_with_its_own_value(sandbox, tmp_path):
    values = [torch.randn(4, 4), "text", {"a": [1, 2.5, None]}, torch.zeros(200_000), 7]  # one over a pipe's buffer
    result = sandbox.run(module(tmp_path, SEEN), "submission", [call("echo", v) for v in values], [2, 3])
    assert result.status == "ok", result.reason
    assert len(result.calls) == len(values)
    for got, sent in zip(result.calls, values):
        assert torch.equal(got.value, sent) if isinstance(sent, torch.Tensor) else got.value == sent


def test_no_batch_reaches_import_time_code_nor_a_call_of_an_earlier_batch(sandbox, tmp_path):
    calls = [call("at_import", FIRST), call("now", FIRST), call("now", SECOND)]
    result = sandbox.run(module(tmp_path, SEEN), "submission", calls, [2, 1])
    assert result.status == "ok", result.reason
    at_import, first_batch, second_batch = (c.value for c in result.calls)
    assert at_import == []
    # During the first batch its own input is there (the looking works), the second's is not yet sent.
    assert first_batch == [FIRST]
    assert SECOND in second_batch


def test_a_call_that_raises_fails_only_itself_and_its_batch_goes_on(sandbox, tmp_path):
    calls = [call("echo", 1), call("fails"), call("echo", 3), call("missing_name"), call("echo", 5)]
    result = sandbox.run(module(tmp_path, SEEN), "submission", calls, [3, 2])
    assert result.status == "ok", result.reason
    assert [c.ok for c in result.calls] == [True, False, True, False, True]
    assert result.calls[1].error_type == "ValueError" and result.calls[3].error_type == "AttributeError"
    assert [c.value for c in result.calls if c.ok] == [1, 3, 5]


def test_a_limit_names_the_call_of_the_batch_that_was_running(sandbox, tmp_path):
    limits = Limits(timeout_s=2, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=1)
    with Sandbox(limits) as box:
        result = box.run(module(tmp_path, SEEN), "submission", [call("echo", 1), call("spin"), call("echo", 3)],
                         [3])
    assert result.status == "timeout" and result.ended_by == "limit", result.reason
    assert "during call 2" in result.reason, result.reason
    assert [c.value for c in result.calls] == [1]  # what it finished is kept


@pytest.mark.parametrize("batches", [[1, 1], [4], [0, 3], [2, -1, 2], [1.5, 1.5]])
def test_batches_that_do_not_add_up_to_the_calls_are_refused(sandbox, tmp_path, batches):
    with pytest.raises(ValueError, match="batches"):
        sandbox.run(module(tmp_path, SEEN), "submission", [call("echo", i) for i in range(3)], batches)


@pytest.mark.parametrize("exercise_id", ["01", "03", "11"])
def test_the_judge_batches_each_check_s_calls_and_each_figure_alone(exercise_id):
    exercise = load_course(check_files=False).exercise(exercise_id)
    plan = CheckPlan.build(checks_for(exercise), figures=figures_for(exercise))
    sizes = check_batches(plan)
    assert sum(sizes) == len(plan.calls)
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    for check_id, calls in plan.slices.items():
        if calls.stop > calls.start:
            assert calls.start in starts and sizes[starts.index(calls.start)] == calls.stop - calls.start, check_id
    for _, index in plan.figures.values():
        assert index in starts and sizes[starts.index(index)] == 1
