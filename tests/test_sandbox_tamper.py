"""Tampering voids the run (issue 36): a child whose result channel carries
a frame its own sender did not send in turn (forged, extra, repeated,
out of order, swallowed) or whose pipes were used by someone else ends as
``tampered``, with no call's result kept, and the judge gives every check
of the exercise 0, those answered before the break too.

The attacks are a student's, who has read grader/sandbox/child.py and
channel.py: the sender is reachable as ``child._channel.send``, the frame
format is wire's, and the frame numbers are easy to count (layers 0,
imported 1, call i's result i + 2). What stays possible is in SECURITY.md.
"""
from __future__ import annotations

import pytest

from grader.sandbox import Limits, Sandbox, runstate, wire
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=8, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=1)

ATTACKS = '''
import os, sys, threading
from grader.sandbox import wire
child = sys.modules["grader.sandbox.child"]
SAVED = []

def one():
    return 1

def forge_through_the_sender():
    """The forged result for this call, then the real one follows."""
    child._channel.send({"kind": "result", "i": 1}, wire.dumps(2))
    return 1

def forge_through_send_as_in_the_issue():
    """The issue's attack: the result frame through child._send, then the real one."""
    child._send({"kind": "result", "i": 1}, wire.dumps(2))
    return 1

def forge_and_rebind_the_sender():
    """Rebinding the sender's names does not reach the serve loop's own copy."""
    child._channel.send({"kind": "result", "i": 1}, wire.dumps(2))
    child._channel.send = lambda *a, **k: None
    child._send = lambda *a, **k: None
    return 1

def forge_numbered_then_swallow_by_fd():
    """The forged frame numbered right, written beside the sender; the real
    one swallowed by /dev/null in place of fd 4 (restored by the next call)."""
    os.write(4, wire.frame({"kind": "result", "i": 1, "seq": 3}, 2))
    SAVED.append(os.dup(4))
    os.dup2(os.open("/dev/null", os.O_WRONLY), 4)
    return 1

def forge_numbered_then_swallow_by_defaults():
    """The real frame swallowed by the sender's own write, swapped in its defaults."""
    os.write(4, wire.frame({"kind": "result", "i": 1, "seq": 3}, 2))
    send = child._channel.send
    real = send.__kwdefaults__["_write"]
    def swallow(fd, data):
        send.__kwdefaults__["_write"] = real
        return len(data)
    send.__kwdefaults__["_write"] = swallow
    return 1

def forge_numbered_then_swallow_by_code():
    """The call's code swapped for one that returns the forged value itself."""
    os.write(4, wire.frame({"kind": "result", "i": 1, "seq": 3}, 2))
    child._call.__code__ = (lambda i, fn, module, kwargs, *, _state=None: ({"kind": "result", "i": i}, b"")).__code__
    return 1

def restore():
    if SAVED:
        os.dup2(SAVED[0], 4)
    return 1

def extra_frame():
    child._channel.send({"kind": "imported"})
    return 1

def ahead_of_its_turn():
    child._channel.send({"kind": "result", "i": 2}, wire.dumps(2))
    return 1

def numbered_twice():
    os.write(4, wire.frame({"kind": "result", "i": 1, "seq": 3}, 2))
    return 1

def unnumbered():
    os.write(4, wire.frame({"kind": "result", "i": 1}, 2))
    os._exit(0)

def closes_the_result_pipe():
    os.close(4)
    return 1
'''

ATTACK_NAMES = ["forge_through_the_sender", "forge_through_send_as_in_the_issue", "forge_and_rebind_the_sender", "forge_numbered_then_swallow_by_fd",
                "forge_numbered_then_swallow_by_defaults", "forge_numbered_then_swallow_by_code", "extra_frame",
                "ahead_of_its_turn", "numbered_twice", "unnumbered", "closes_the_result_pipe"]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


@pytest.mark.parametrize("batches", [[1, 1, 1, 1], [4]], ids=["call by call", "one batch"])
@pytest.mark.parametrize("attack", ATTACK_NAMES)
def test_a_forged_extra_swallowed_or_misplaced_frame_voids_the_whole_run(sandbox, tmp_path, attack, batches):
    calls = [selftest_call("one"), selftest_call(attack), selftest_call("restore"), selftest_call("one")]
    result = sandbox.run(submission_folder(tmp_path, ATTACKS), "submission", calls, batches)
    assert result.status == "tampered", (result.status, result.reason)
    assert result.calls == []  # call 0's honest answer is not kept either
    assert result.ended_by == "itself" and not result.from_outside  # never run again
    healthy = sandbox.run(submission_folder(tmp_path, ATTACKS), "submission", [selftest_call("one")] * 3)
    assert healthy.status == "ok" and [c.value for c in healthy.calls] == [1, 1, 1]


# -- the grader's side, frame by frame -----------------------------------------------

def _state(n_calls: int = 2) -> runstate.RunState:
    state = runstate.RunState(LIMITS, ["coursekit.probes.sandbox_selftest:call"] * n_calls, "submission")
    state._batches = [(n_calls, b"")]
    state._queue = lambda frame: None  # no child to write to
    return state


def _frames(*headers: dict) -> bytes:
    return b"".join(wire.frame(h, payload=wire.dumps(1) if h["kind"] == "result" else b"") for h in headers)


HONEST = [{"kind": "layers", "layers": {"seccomp": "active"}}, {"kind": "imported"}, {"kind": "result", "i": 0},
          {"kind": "result", "i": 1}, {"kind": "done"}]


def _numbered(headers: list[dict]) -> list[dict]:
    return [{**h, "seq": n} for n, h in enumerate(headers)]


BROKEN = {
    "a repeated frame": _numbered(HONEST[:3]) + [{**HONEST[2], "seq": 2}],
    "a gap (a frame swallowed)": _numbered(HONEST[:3]) + [{**HONEST[3], "seq": 4}],
    "no number": _numbered(HONEST[:3]) + [HONEST[3]],
    "out of order": _numbered([*HONEST[:2], HONEST[3], HONEST[2]]),
    "a second layers report": _numbered([*HONEST[:3], HONEST[0]]),
    "an unknown kind": _numbered([*HONEST[:3], {"kind": "passed"}]),
    "the child's own report": _numbered([*HONEST[:3], {"kind": "tampered", "error": "fd 5 was closed"}]),
}


def test_the_honest_stream_is_accepted():
    state = _state()
    assert state._take_results(_frames(*_numbered(HONEST)))
    assert state.done and state.tampered is None and len(state.calls) == 2
    assert state.result(None, 0.0).status == "ok"


@pytest.mark.parametrize("case", BROKEN)
def test_any_frame_the_sender_would_not_send_is_tampering_and_keeps_nothing(case):
    state = _state()
    state._take_results(_frames(*BROKEN[case]))
    result = state.result(None, 0.0)
    assert result.status == "tampered" and result.calls == [], (case, result.reason)


def test_a_garbled_header_or_a_stream_past_the_run_s_budget_is_tampering():
    state = _state()
    state._take_results(b"\x05\x00\x00\x00" + bytes(8) + b"PASS!")
    assert state.result(None, 0.0).status == "tampered"
    state = _state()
    state._reader = wire.FrameReader(max_total=100)  # the child's own sender stops well before its budget
    state._take_results(_frames(*_numbered(HONEST[:2])) + bytes(200))
    assert state.result(None, 0.0).status == "tampered"


def test_a_cut_frame_is_an_end_not_tampering():
    """The child killed in the middle of a frame (the OOM killer, a limit):
    the partial frame is dropped and how it ended decides, as before."""
    state = _state()
    whole = _frames(*_numbered(HONEST[:3]))
    state._take_results(whole + _frames(*_numbered(HONEST[:4]))[len(whole):-3])
    assert not state._take_results(b"")
    assert state.cut and state.tampered is None
    result = state.result({"op": "reaped", "status": 9, "cpu_s": 0.1}, 0.0)  # SIGKILL from outside
    assert result.status == "crashed" and len(result.calls) == 1


def test_the_tamper_exit_status_is_tampering():
    state = _state()
    state._take_results(_frames(*_numbered(HONEST[:3])))
    result = state.result({"op": "reaped", "status": wire.TAMPER_EXIT << 8, "cpu_s": 0.1}, 0.0)
    assert result.status == "tampered" and result.calls == []


# -- the judge: every check 0, with one plain reason ---------------------------------

FORGING_SOFTMAX = '''
import sys, torch
CALLS = [0]
def softmax(x, dim=-1):
    CALLS[0] += 1
    if CALLS[0] == 6:  # well after the first checks passed
        sys.modules["grader.sandbox.child"]._channel.send({"kind": "imported"})
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
'''


def test_the_judge_keeps_no_point_of_a_tampered_run(course, judge, tmp_path):
    exercise = course.exercise("01")
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / exercise.module).write_text(FORGING_SOFTMAX)
    result = judge.grade(exercise, folder, tmp_path / "work")
    assert result.status == "tampered" and result.points == 0, result.reason
    assert all(not v.passed and v.points == 0 and v.kind == "tampered" for v in result.verdicts)
    assert "every check" in result.reason and "所有检查" in result.reason
    honest = FORGING_SOFTMAX.replace("CALLS[0] == 6", "False")
    (folder / exercise.module).write_text(honest)
    assert judge.grade(exercise, folder, tmp_path / "work2").points > 0  # the same code, untampered, scores


def test_the_child_s_own_sender_never_passes_the_run_s_budget():
    """The grader reads a stream past wire.MAX_TOTAL as tampering, so the
    child's own code must refuse a result that would take it there: that
    call fails (as a result too large does), the run goes on."""
    import torch

    from grader.sandbox import child

    header, payload = child._call(0, lambda module: torch.zeros(8), None, {},
                                  _state={"total": wire.MAX_TOTAL - child._RESERVE})
    assert (header["kind"], header["error_type"], payload) == ("error", "ProtocolError", b"")
    header, payload = child._call(0, lambda module: torch.zeros(8), None, {}, _state={"total": 0})
    assert header == {"kind": "result", "i": 0} and wire.loads(payload).shape == (8,)
