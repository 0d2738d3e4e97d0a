"""The sandbox's trust boundary, round two (issue 13): hidden inputs reach
the child only when their call starts, never at import time; and a run is
run again only when something outside the submission ended it. The
seccomp allow list is tested in tests/test_sandbox_seccomp.py.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from grader.course import REPO_ROOT
from grader.sandbox import Limits, RunResult, Sandbox
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=8, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=2)
MARK = "hidden-input-7f3a91"  # a hidden input's text: it must reach only its own call's arguments
SECRET = torch.full((3, 5), 0.123456789)


call = selftest_call


def module(tmp_path: Path, source: str, name: str = "submission") -> Path:
    return submission_folder(tmp_path, source, folder_name=name)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


# -- inputs arrive after the import ---------------------------------------------------------

LOOK_AROUND = f'''
import gc, os, torch

def look_around():
    """Everything import-time code can reach: the call pipe, the process's
    objects, the frames that are importing it."""
    seen = []
    try:
        os.set_blocking(3, False)
        data = os.read(3, 1 << 20)
        seen.append(f"fd3 gave {{len(data)}} bytes")
        seen.append(data.decode("latin-1"))
    except BlockingIOError:
        pass
    except OSError as exc:
        seen.append(f"fd3 {{exc}}")
    finally:
        try:
            os.set_blocking(3, True)
        except OSError:
            pass
    for path in ("/proc/self/fd/3", "/dev/stdin"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            seen.append(os.read(fd, 1 << 20).decode("latin-1"))
        except OSError:
            pass
    mark = "".join({[MARK[:7], MARK[7:]]!r})  # built here: a literal would be in the code's constants
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and obj.numel() == 15 and bool((obj == 0.123456789).all()):
            seen.append("the hidden tensor, in memory")
        elif type(obj) in (dict, list, tuple):
            items = obj.values() if type(obj) is dict else obj
            if any(type(item) is str and item == mark for item in items):
                seen.append("the hidden text, in memory")
    return [s for s in seen if s]

SEEN_AT_IMPORT = look_around()
'''


def test_code_at_import_time_finds_no_hidden_inputs(sandbox, tmp_path):
    source = LOOK_AROUND + '''
def seen_at_import(text, tensor):
    return SEEN_AT_IMPORT
def seen_now(text, tensor):
    return look_around()
'''
    calls = [call("seen_at_import", MARK, SECRET), call("seen_now", MARK, SECRET)]
    result = sandbox.run(module(tmp_path, source), "submission", calls)
    assert result.status == "ok", result.reason
    at_import, now = (c.value for c in result.calls)
    assert at_import == [], at_import
    # The looking itself works: during the call its own inputs are in memory.
    assert any("hidden" in seen for seen in now), now


def test_an_import_error_cannot_quote_the_hidden_inputs(sandbox, tmp_path):
    source = LOOK_AROUND + "raise ValueError('stolen: ' + repr(SEEN_AT_IMPORT))\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("f", MARK, SECRET)] * 3)
    assert result.status == "import_error" and "stolen: []" in result.reason, result.reason
    assert MARK not in result.reason + result.stdout + result.stderr


def test_a_hook_that_waits_for_the_inputs_steals_them_only_from_its_own_run(sandbox, tmp_path):
    """A thread started at import that reads the call pipe takes frames the
    child's loop was waiting for: that run breaks, and nothing it read
    reaches anything but its own (failed) results."""
    source = '''
import os, threading
def steal():
    os.set_blocking(3, True)
    data = os.read(3, 1 << 20)
    print("stolen", len(data))
threading.Thread(target=steal, daemon=True).start()
def f(text, tensor):
    return 1
'''
    result = sandbox.run(module(tmp_path, source), "submission", [call("f", MARK, SECRET)])
    assert result.status in {"timeout", "ok", "crashed", "tampered"}, result.reason
    assert MARK not in result.reason
    if result.status == "timeout":
        assert result.ended_by == "limit" and not result.from_outside


def test_calls_still_run_in_order_with_their_own_inputs(sandbox, tmp_path):
    source = "def echo(x):\n    return x\n"
    values = [torch.randn(50, 50), "text", {"a": [1, 2.5, None]}, torch.zeros(200_000)]  # one over a pipe's buffer
    result = sandbox.run(module(tmp_path, source), "submission", [call("echo", v) for v in values])
    assert result.status == "ok", result.reason
    for got, sent in zip(result.calls, values):
        assert torch.equal(got.value, sent) if isinstance(sent, torch.Tensor) else got.value == sent


# -- who ended the run ---------------------------------------------------------------------

SELF_ENDINGS = '''
import ctypes, os, signal, time
def sigkill():
    os.kill(os.getpid(), signal.SIGKILL)
def sigkill_thread():
    signal.pthread_kill(threading_main(), signal.SIGKILL)
def threading_main():
    import threading
    return threading.main_thread().ident
def segv():
    os.kill(os.getpid(), signal.SIGSEGV)
def abort():
    os.abort()
def exit0():
    os._exit(0)
def hang_up():
    os.close(4)
    time.sleep(60)
def null_pointer():
    ctypes.string_at(0)
'''


@pytest.mark.parametrize("name, words", [("segv", "SIGSEGV"), ("abort", "SIGABRT"), ("exit0", "exited (code 0)"),
                                         ("hang_up", "closed its result stream"), ("null_pointer", "SIGSEGV")])
def test_a_child_that_ends_itself_is_not_from_outside(sandbox, tmp_path, name, words):
    result = sandbox.run(module(tmp_path, SELF_ENDINGS), "submission", [call(name)])
    assert result.status == "crashed" and words in result.reason, result.reason
    assert result.ended_by == "itself" and not result.from_outside


def test_a_child_cannot_sigkill_itself(sandbox, tmp_path):
    """So that a SIGKILL always came from outside it."""
    source = SELF_ENDINGS + '''
import fcntl, resource
def setsig():
    fcntl.fcntl(4, 10, signal.SIGKILL)  # F_SETSIG: the kernel would SIGKILL it on I/O readiness
def lower_cpu_limit():
    resource.setrlimit(resource.RLIMIT_CPU, (1, 1))
def timer():
    libc = ctypes.CDLL(None, use_errno=True)
    event = (ctypes.c_int * 16)(0, signal.SIGKILL, 0)  # sigevent: SIGEV_SIGNAL, SIGKILL
    timer_id = ctypes.c_void_p()
    if libc.syscall(222, 1, event, ctypes.byref(timer_id)) != 0:  # timer_create(CLOCK_MONOTONIC)
        raise OSError(ctypes.get_errno(), "timer_create")
def limits_still_readable():
    return resource.getrlimit(resource.RLIMIT_CPU)[0]
def own_signal():
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
    os.kill(os.getpid(), signal.SIGUSR1)
    return got
'''
    names = ["sigkill", "sigkill_thread", "setsig", "lower_cpu_limit", "timer", "limits_still_readable", "own_signal"]
    result = sandbox.run(module(tmp_path, source), "submission", [call(n) for n in names])
    assert result.status == "ok", result.reason
    *refused, limit, own = result.calls
    assert [c.ok for c in refused] == [False] * 5, refused
    assert {c.error_type for c in refused} <= {"PermissionError", "ValueError", "OSError"}, refused
    assert limit.ok and limit.value == 4 and own.value == [1]


def test_without_seccomp_a_self_sigkill_is_its_own_doing(tmp_path):
    with Sandbox(LIMITS, disable=["seccomp"]) as box:
        result = box.run(module(tmp_path, SELF_ENDINGS), "submission", [call("sigkill")])
    assert result.status == "crashed" and "SIGKILL" in result.reason
    assert result.ended_by == "itself" and not result.from_outside


def _kill_running_child(box: Sandbox, after_s: float, sig: int = signal.SIGKILL) -> threading.Thread:
    def kill() -> None:
        deadline = time.monotonic() + 30
        while not box.running() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(after_s)
        for pid in box.running():
            os.kill(pid, sig)
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


NAP = "import time\ndef nap():\n    time.sleep(5)\n    return 1\n"


def test_an_operator_s_kill_9_is_from_outside(sandbox, tmp_path):
    _kill_running_child(sandbox, 1.0)
    result = sandbox.run(module(tmp_path, NAP), "submission", [call("nap")])
    assert result.status == "crashed" and "SIGKILL" in result.reason
    assert result.ended_by == "outside" and result.from_outside


def test_a_dead_fork_server_is_from_outside(tmp_path):
    with Sandbox(LIMITS) as box:
        box.layers()
        server = box._proc.pid

        def kill_server() -> None:
            while not box.running():
                time.sleep(0.01)
            time.sleep(0.5)
            os.kill(server, signal.SIGKILL)
        threading.Thread(target=kill_server, daemon=True).start()
        result = box.run(module(tmp_path, NAP), "submission", [call("nap")])
    assert result.status == "crashed" and result.ended_by == "infrastructure" and result.from_outside


def test_a_timeout_is_a_limit_and_not_run_again(tmp_path):
    with Sandbox(Limits(timeout_s=2, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=1)) as box:
        result = box.run(module(tmp_path, NAP), "submission", [call("nap")])
    assert result.status == "timeout" and result.ended_by == "limit" and not result.from_outside


MEMORY_CGROUP = Path("/sys/fs/cgroup/memory")


@pytest.mark.skipif(os.geteuid() != 0 or not (MEMORY_CGROUP / "cgroup.procs").exists(),
                    reason="needs root and the cgroup v1 memory controller to make an OOM kill")
def test_an_oom_kill_is_from_outside(sandbox, tmp_path):
    group = MEMORY_CGROUP / f"sandbox-test-oom-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(200 << 20))
        source = "import time, torch\ndef grow():\n    time.sleep(2)\n" \
                 "    return torch.ones(600 << 20, dtype=torch.uint8).sum().item()\n"

        def confine() -> None:
            while not sandbox.running():
                time.sleep(0.01)
            for pid in sandbox.running():
                (group / "cgroup.procs").write_text(str(pid))
        threading.Thread(target=confine, daemon=True).start()
        result = sandbox.run(module(tmp_path, source), "submission", [call("grow")])
    finally:
        deadline = time.monotonic() + 10
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        group.rmdir()
    assert result.status == "crashed" and "SIGKILL" in result.reason, result.reason
    assert result.ended_by == "oom_killer" and result.from_outside


class CountingSandbox:
    """A Sandbox whose runs are counted, and whose first ``kills`` runs of
    module ``target`` are killed from outside after ``after_s``."""

    def __init__(self, box: Sandbox, target: str, kills: int = 0, after_s: float = 1.0) -> None:
        self.box, self.target, self.kills, self.after_s = box, target, kills, after_s
        self.runs: list[RunResult] = []

    def __getattr__(self, name: str):
        return getattr(self.box, name)

    def run(self, folder: Path, module_name: str, calls, batches=None) -> RunResult:
        if Path(folder).name == self.target and self.kills > 0:
            self.kills -= 1
            _kill_running_child(self.box, self.after_s)
        result = self.box.run(folder, module_name, calls, batches)
        if Path(folder).name == self.target:
            self.runs.append(result)
        return result


@pytest.fixture(scope="module")
def course():
    from grader.course import load_course
    return load_course(check_files=False)


def _grade(course, box, source: str, tmp_path: Path, kills: int = 0) -> tuple[object, CountingSandbox]:
    from grader.judge import Judge
    exercise = course.exercise("01")
    folder = tmp_path / "student"
    folder.mkdir(parents=True)
    (folder / exercise.module).write_text(source)
    counting = CountingSandbox(box, "student", kills=kills)
    result = Judge(course, counting).grade(exercise, folder, tmp_path / "work")
    return result, counting


SLOW_SOFTMAX = '''
import time, torch
def softmax(x, dim=-1):
    time.sleep(0.05)  # long enough for a kill from outside to land during the run
    row_max = x.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(x - row_max)
    return exp / exp.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
'''


def test_the_judge_runs_a_self_killed_submission_once(course, tmp_path):
    source = "import os, signal, time\ndef softmax(x, dim=-1):\n    time.sleep(1.5)\n" \
             "    os.kill(os.getpid(), signal.SIGKILL)\n"
    with Sandbox(Limits(timeout_s=2, cpu_s=4, memory_mb=3072, output_limit_kb=16, threads=1),
                 disable=["seccomp"]) as box:  # without seccomp the self-kill lands
        result, counting = _grade(course, box, source, tmp_path)
    assert [r.ended_by for r in counting.runs] == ["itself"] and result.points == 0
    assert result.status == "crashed" and "SIGKILL" in result.reason


def test_the_judge_runs_a_submission_killed_from_outside_again_once(course, sandbox, tmp_path):
    result, counting = _grade(course, sandbox, SLOW_SOFTMAX, tmp_path, kills=1)
    assert [r.ended_by for r in counting.runs] == ["outside", "itself"]
    assert result.status == "graded" and result.points == result.max_points
    twice, counting = _grade(course, sandbox, SLOW_SOFTMAX, tmp_path / "again", kills=2)
    assert [r.ended_by for r in counting.runs] == ["outside", "outside"]  # a second kill is kept
    assert twice.status == "crashed" and twice.points == 0


class EndedFromOutsideOnce:
    """A Sandbox whose first run of each folder named in ``targets`` comes
    back as the machine ending it (as a kill -9 of that child reads), cut
    after its third call: the judge's own runs met with a fault."""

    def __init__(self, box: Sandbox, targets: tuple[str, ...]) -> None:
        self.box, self.pending, self.runs = box, set(targets), []

    def __getattr__(self, name: str):
        return getattr(self.box, name)

    def run(self, folder: Path, module_name: str, calls, batches=None, timeout_s=None) -> RunResult:
        result = self.box.run(folder, module_name, calls, batches, timeout_s=timeout_s)
        name = "second run" if timeout_s is not None else Path(folder).name   # only a second run has its own clock
        if name in self.pending:
            self.pending.discard(name)
            result = replace(result, status="crashed", calls=result.calls[:3], ended_by="outside",
                             reason="crashed, ended before finishing: killed by SIGKILL from outside")
        self.runs.append((name, result.ended_by))
        return result


def test_a_reference_or_variant_run_ended_from_outside_is_made_again(course, sandbox, tmp_path):
    """A kill -9 of the reference's run stopped the class ("the reference of
    01_softmax fails its own hidden checks", a CI run of the worker-kill
    fault test); a variant's would have misled every hint of its input set."""
    from grader.course.pitfalls import load_variants
    from grader.judge import Judge

    exercise = course.exercise("01")
    pitfall_id, variant = next(iter(load_variants(exercise, REPO_ROOT).items()))
    box = EndedFromOutsideOnce(sandbox, ("reference-01", f"variant-01-{pitfall_id}"))
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / exercise.module).write_text(variant.source)
    result = Judge(course, box).grade(exercise, folder, tmp_path / "work")
    assert [ended for name, ended in box.runs if name == "reference-01"] == ["outside", "itself"]
    assert [ended for name, ended in box.runs if name == f"variant-01-{pitfall_id}"] == ["outside", "itself"]
    assert result.status == "graded" and pitfall_id in {p for v in result.verdicts for p in v.confirmed}


def test_a_second_run_ended_from_outside_is_made_again(course, sandbox, tmp_path):
    """The second run, on the fixed inputs (grader/suspects.py), too: a
    fallback to other hints would change a regraded class's results."""
    from conftest import TEST_GRADING_SECRET
    from grader.checks.inputs import HiddenInputs
    from grader.course.pitfalls import load_variants
    from grader.intake.submissions import assemble
    from grader.judge import Judge

    exercise = course.exercise("01")
    pitfall_id, variant = next(iter(load_variants(exercise, REPO_ROOT).items()))
    box = EndedFromOutsideOnce(sandbox, ("second run",))
    judge = Judge(course, box, inputs=HiddenInputs(TEST_GRADING_SECRET.encode()))
    folder = assemble(exercise, variant.source.encode() + b"# mine\n", tmp_path / "student", course)
    result = judge.grade(exercise, folder, tmp_path / "work")
    assert [ended for name, ended in box.runs if name == "second run"] == ["outside", "itself"]
    assert pitfall_id in {p for v in result.verdicts for p in v.confirmed}
