"""The sandbox: runs probes on a module in a confined child and returns
plain data. These tests cover normal use, the wire format and the policy;
tests/test_sandbox_redteam.py covers attacks. Both must pass as root (CI)
and as an ordinary user (scripts/test-unprivileged.sh)."""
from __future__ import annotations

import collections
import ctypes
import ctypes.util
import io
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from grader.sandbox import CallResult, Limits, ProbeCall, Sandbox, policy, seccomp, syscalls, wire
from probecalls import selftest_call, submission_folder

REPO = Path(__file__).resolve().parents[1]
LIMITS = Limits(timeout_s=20, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=2)


call = selftest_call


def module(tmp_path: Path, source: str, name: str = "submission") -> Path:
    return submission_folder(tmp_path, source, module_name=name)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


NORMAL = """
import torch
def double(x):
    return x * 2
def mixed():
    return {"t": torch.arange(3), "dtype": torch.float64, "nested": [(1, 2.5, "s", None, True)],
            "shape": torch.zeros(2, 3).shape, "param": torch.nn.Parameter(torch.ones(2))}
def fails():
    raise RuntimeError("shape mismatch\\nsecond line")
def greet():
    print("hello out")
    import sys; print("hello err", file=sys.stderr)
    return 1
"""


def test_a_normal_module_returns_plain_data(sandbox, tmp_path):
    x = torch.randn(4, 5)
    result = sandbox.run(module(tmp_path, NORMAL), "submission", [call("double", x), call("mixed")])
    assert (result.status, result.reason) == ("ok", "ok")
    assert torch.equal(result.calls[0].value, x * 2) and type(result.calls[0].value) is torch.Tensor
    mixed = result.calls[1].value
    assert mixed["dtype"] is torch.float64 and mixed["nested"] == [(1, 2.5, "s", None, True)]
    assert mixed["shape"] == (2, 3) and type(mixed["param"]) is torch.Tensor
    assert result.wall_s > 0


def test_the_reference_solution_runs_through_the_same_sandbox(sandbox):
    x = torch.randn(3, 7) * 50
    probe = ProbeCall("coursekit.probes.softmax:softmax_output", {"x": x, "dim": -1})
    result = sandbox.run(REPO / "solutions" / "01_softmax", "softmax", [probe])
    assert result.status == "ok", result.reason
    assert torch.allclose(result.calls[0].value["output"], torch.softmax(x, dim=-1))
    assert result.calls[0].value["input_unchanged"] is True


def test_lazy_imports_and_a_training_loop_work_in_the_child(sandbox, tmp_path):
    """The interpreter lives under a 0700 /root here (research §2): modules
    nobody imported before the fork must still load after the uid drop."""
    source = """
import torch
def lazy():
    import cProfile, email.mime.text, xml.dom.minidom, torch.distributions
    return torch.distributions.Normal(0.0, 1.0).log_prob(torch.zeros(1)).item() < 0
def train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
    torch.save(model.state_dict(), "model.pt")
    return [losses[-1] < losses[0], sorted(torch.load("model.pt"))]
"""
    result = sandbox.run(module(tmp_path, source), "submission", [call("lazy"), call("train")])
    assert result.status == "ok", result
    assert result.calls[0].value is True, result.calls[0]
    assert result.calls[1].value == [True, ["0.bias", "0.weight", "2.bias", "2.weight"]], result.calls[1]


def test_a_syntax_error_is_an_import_error_with_its_line(sandbox, tmp_path):
    result = sandbox.run(module(tmp_path, "import torch\n\ndef f(x:\n    return x\n"), "submission", [call("f")])
    assert result.status == "import_error" and result.calls == []
    assert "syntax error on line 3" in result.reason


def test_a_missing_module_is_an_import_error(sandbox, tmp_path):
    result = sandbox.run(tmp_path, "nothing_here", [call("f")])
    assert result.status == "import_error" and "nothing_here.py is missing" in result.reason


def test_an_exception_fails_one_call_in_one_line_and_the_run_goes_on(sandbox, tmp_path):
    folder = module(tmp_path, NORMAL)
    result = sandbox.run(folder, "submission", [call("fails"), call("missing_function"), call("double", 1)])
    assert result.status == "ok"
    first, second, third = result.calls
    assert (first.ok, first.error_type) == (False, "RuntimeError")
    assert first.error == "RuntimeError: shape mismatch second line"  # one line
    assert (second.ok, second.error_type) == (False, "AttributeError")
    assert third == CallResult(ok=True, value=2)
    # Where: the submission's own file and line (the raise in fails()), never
    # a probe's frame; a call that never reached the submission has none.
    assert first.where == ("submission.py", NORMAL.splitlines().index('    raise RuntimeError("shape mismatch\\nsecond line")') + 1)
    assert second.where is None


def test_an_unknown_probe_fails_only_its_call(sandbox, tmp_path):
    calls = [ProbeCall("coursekit.probes.no_such_module:f"), call("double", 3)]
    result = sandbox.run(module(tmp_path, NORMAL), "submission", calls)
    assert result.status == "ok" and result.calls[0].error_type == "ModuleNotFoundError"
    assert result.calls[1].value == 6


@pytest.mark.parametrize("probe", ["os:system", "coursekit.loader:load_module", "grader.sandbox.child:run",
                                   "coursekit.probes.softmax", "coursekit.probes.x:y; import os"])
def test_probe_calls_must_name_a_function_of_the_probe_library(probe):
    with pytest.raises(ValueError, match="coursekit.probes"):
        ProbeCall(probe, {})


def test_the_repository_itself_is_never_a_module_folder(sandbox):
    with pytest.raises(ValueError, match="contains the repository"):
        sandbox.run(REPO, "course", [])
    with pytest.raises(ValueError, match="not a module name"):
        sandbox.run(REPO / "coursekit", "../grader/cli", [])


def test_kwargs_must_be_plain_data(sandbox, tmp_path):
    refused = call("double", object())
    for _ in range(2):  # every time: a call's encoding is kept only once it is valid
        with pytest.raises(ValueError, match="plain data"):
            sandbox.run(module(tmp_path, NORMAL), "submission", [call("double", 2), refused])


def test_stdout_and_stderr_are_captured(sandbox, tmp_path):
    result = sandbox.run(module(tmp_path, NORMAL), "submission", [call("greet")])
    assert result.status == "ok" and result.stdout == "hello out\n" and result.stderr == "hello err\n"


def test_output_over_the_cap_ends_the_run_as_output_limit(sandbox, tmp_path):
    source = "def shout():\n    while True:\n        print('x' * 1000)\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("shout")])
    assert result.status == "output_limit" and "16 KiB" in result.reason
    assert len(result.stdout) < 17 * 1024 and result.stdout.endswith("[output truncated at 16 KiB]")


def test_the_scratch_folder_is_the_cwd_private_and_fresh_per_run(sandbox, tmp_path):
    source = """
import os, torch
def write():
    torch.save(torch.ones(2), "model.pt")
    return [os.getcwd() == os.environ["HOME"] == os.environ["TMPDIR"], sorted(os.listdir("."))]
def look():
    return sorted(os.listdir("."))
"""
    folder = module(tmp_path, source)
    first = sandbox.run(folder, "submission", [call("write")])
    assert first.calls[0].value == [True, ["model.pt"]]
    assert sandbox.run(folder, "submission", [call("look")]).calls[0].value == []


def test_the_module_folder_is_read_only_and_the_original_is_untouched(sandbox, tmp_path):
    source = """
import os
def tamper():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "submission.py"), "a") as f:
        f.write("HACKED = True\\n")
def sibling():
    return open(os.path.join(os.path.dirname(__file__), "data.txt")).read()
"""
    folder = module(tmp_path, source)
    (folder / "data.txt").write_text("shipped with the submission")
    result = sandbox.run(folder, "submission", [call("tamper"), call("sibling")])
    assert result.calls[0].ok is False and result.calls[0].error_type in {"OSError", "PermissionError"}
    assert result.calls[1].value == "shipped with the submission"
    assert (folder / "submission.py").read_text() == source


def test_concurrent_runs_share_one_sandbox(sandbox, tmp_path):
    folder = module(tmp_path, NORMAL)
    results: dict[int, object] = {}

    def work(n: int) -> None:
        results[n] = sandbox.run(folder, "submission", [call("double", n)])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: (r.status, r.calls[0].value) for n, r in results.items()} == {n: ("ok", 2 * n) for n in range(4)}


@pytest.mark.slow
def test_a_dead_fork_server_is_replaced_on_the_next_run(tmp_path):
    folder = module(tmp_path, NORMAL)
    with Sandbox(LIMITS) as box:
        assert box.run(folder, "submission", [call("double", 1)]).status == "ok"
        old = box.info()["pid"]
        os.kill(old, signal.SIGKILL)
        result = box.run(folder, "submission", [call("double", 2)])
        assert (result.status, result.calls[0].value) == ("ok", 4) and box.info()["pid"] != old


@pytest.mark.slow
def test_runs_in_flight_when_the_fork_server_dies_fail_alone(tmp_path):
    """With several grading threads on one server, its death fails only the
    runs it was serving; no thread's run on the restarted server is failed
    by another thread noticing the old one's death."""
    folder = module(tmp_path, NORMAL)
    errors: list[BaseException] = []
    statuses: list[str] = []
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                statuses.append(box.run(folder, "submission", [call("double", 1)]).status)
            except BaseException as exc:  # noqa: BLE001 - the test reports any of them
                errors.append(exc)
                return

    with Sandbox(LIMITS) as box:
        box.run(folder, "submission", [])
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        killed = None
        try:
            for _ in range(4):
                server = box.info()["pid"]  # the current server (started here if no thread has yet)
                while server == killed:  # info() can answer for the killed one until it is reaped
                    time.sleep(0.05)
                    server = box.info()["pid"]
                time.sleep(0.2)  # runs whose children outlived the killed server finish "ok" meanwhile
                oks = statuses.count("ok")
                while statuses.count("ok") < oks + 4 and not errors:  # this server is serving
                    time.sleep(0.05)
                os.kill(server, signal.SIGKILL)
                killed = server
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        assert statuses.count("ok") > 0 and box.run(folder, "submission", [call("double", 2)]).status == "ok"


@pytest.mark.slow
def test_a_fork_server_killed_while_starting_is_started_again(tmp_path):
    folder = module(tmp_path, NORMAL)
    before = set(_children(os.getpid()))
    killed: list[int] = []

    def kill_the_first_new_server() -> None:
        deadline = time.monotonic() + 30
        while not killed and time.monotonic() < deadline:
            for pid in set(_children(os.getpid())) - before:
                os.kill(pid, signal.SIGKILL)  # long before it has imported torch and said "ready"
                killed.append(pid)
            time.sleep(0.001)

    killer = threading.Thread(target=kill_the_first_new_server)
    killer.start()
    with Sandbox(LIMITS) as box:
        result = box.run(folder, "submission", [call("double", 2)])
        killer.join()
        assert killed and box.info()["pid"] not in killed
    assert (result.status, result.calls[0].value) == ("ok", 4)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(child) for child in fh.read().split()]


def test_no_calls_still_imports_the_module(sandbox, tmp_path):
    assert sandbox.run(module(tmp_path, "raise ImportError('nope')\n"), "submission", []).status == "import_error"
    assert sandbox.run(module(tmp_path, NORMAL), "submission", []).status == "ok"


def test_every_layer_is_active_on_this_machine(sandbox):
    """CI and the course machines support every layer; a missing one is a regression."""
    layers = sandbox.layers()
    expected = {"fork_server", "session", "namespaces", "filesystem_view", "rlimits", "landlock", "seccomp"}
    expected |= {"uid_drop"} if os.geteuid() == 0 else {"capabilities_dropped"}
    assert set(layers) == expected
    assert {k: v for k, v in layers.items() if v != "active"} == {}


def test_limits_come_from_course_yaml():
    from grader.course import load_course

    course = load_course(check_files=False)  # other exercises may be work in progress
    limits = Limits.from_grading(course.grading)
    assert limits.timeout_s == course.grading.timeout_s and limits.threads == course.grading.threads


# -- the wire format and decoding, in-process ---------------------------------

def _nested(depth: int) -> list:
    value: list = [1]
    for _ in range(depth):
        value = [value]
    return value


class Liar(torch.Tensor):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value,problem", [
    (torch.ones(2).as_subclass(Liar), "subclass"),
    (torch.nn.Parameter(torch.ones(2)), "subclass"),
    (collections.OrderedDict(a=1), "not plain data"),
    ({1: "a"}, "dict key"),
    ({1, 2}, "not plain data"),
    (b"bytes", "not plain data"),
    (torch.zeros(1).expand(2**40), "too large"),
    (torch.eye(3).to_sparse(), "dense"),
    (_nested(40), "nested"),
])
def test_validation_refuses_anything_but_exact_plain_data(value, problem):
    with pytest.raises(wire.ProtocolError, match=problem):
        wire.validate(value)


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_decoding_refuses_pickles_that_run_code(tmp_path):
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"x": Payload(marker)}, buf)
    for payload in (buf.getvalue(), pickle.dumps(Payload(marker))):
        with pytest.raises(wire.ProtocolError, match="undecodable"):
            wire.loads(payload)
    assert not marker.exists()


def test_frames_round_trip_and_garbage_is_refused():
    reader = wire.FrameReader(max_total=1 << 20)
    data = wire.frame({"kind": "result", "i": 0}, torch.arange(3)) + wire.frame({"kind": "done"})
    frames = [f for chunk in (data[:7], data[7:]) for f in reader.feed(chunk)]
    assert [h["kind"] for h, _ in frames] == ["result", "done"]
    assert torch.equal(wire.loads(frames[0][1]), torch.arange(3))
    with pytest.raises(wire.ProtocolError, match="not JSON"):
        list(wire.FrameReader().feed(b"\x03\x00\x00\x00" + b"\x00" * 8 + b"{{{"))
    deep = b"[" * 60000
    with pytest.raises(wire.ProtocolError, match="not JSON"):
        list(wire.FrameReader().feed(len(deep).to_bytes(4, "little") + bytes(8) + deep))
    with pytest.raises(wire.ProtocolError, match="too large"):
        list(wire.FrameReader().feed(b"\xff\xff\xff\xff" + b"\x00" * 8))
    with pytest.raises(wire.ProtocolError, match="more than"):
        list(wire.FrameReader(max_total=10).feed(b"x" * 11))


@pytest.mark.skipif(not ctypes.util.find_library("seccomp"), reason="libseccomp is not installed")
def test_the_syscall_table_agrees_with_libseccomp():
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp"))
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    for name, number in syscalls.NR.items():
        assert lib.seccomp_syscall_resolve_name(name.encode()) == number, name


def test_the_seccomp_filter_assembles_for_each_architecture():
    for machine, table in syscalls.TABLES.items():
        program = seccomp.build_filter(1234, table, syscalls.AUDIT_ARCH[machine])
        assert len(program) % 8 == 0 and 50 < len(program) // 8 < 4096


def test_the_read_list_keeps_the_repository_out():
    paths = policy.read_paths([str(REPO), str(REPO.parent), "/usr/lib/python3.11"], [])
    assert str(REPO / "coursekit") in paths
    assert not any(Path(p) in (REPO, *REPO.parents) for p in paths)
    assert not any(Path(p).is_relative_to(REPO / "solutions") or Path(p).is_relative_to(REPO / "grader")
                   for p in paths)
    with pytest.raises(ValueError, match="would expose"):
        policy.read_paths([], [REPO.parent])


def test_an_installed_copy_of_the_grader_package_is_carved_out(tmp_path):
    site = tmp_path / "site-packages"
    (site / "grader" / "sandbox").mkdir(parents=True)
    (site / "torch").mkdir()
    paths = policy.read_paths([str(site)], [])
    assert str(site / "torch") in paths and not any(p.startswith(str(site / "grader")) for p in paths)
    assert str(site) not in paths


def test_a_system_folder_holding_the_repository_is_split_around_it(tmp_path):
    repo = tmp_path / "usr" / "src" / "course"
    (repo / "solutions").mkdir(parents=True)
    (tmp_path / "usr" / "lib").mkdir()
    (tmp_path / "usr" / "src" / "other").mkdir()
    parts = policy._split_around(tmp_path / "usr", repo)
    assert sorted(p.name for p in parts) == ["lib", "other"]
