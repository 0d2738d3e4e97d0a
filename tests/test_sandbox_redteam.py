"""Red-team basics: what a hostile submission tries, and what it gets.

Every attack runs in the same Sandbox as the others, and each test ends by
checking that the sandbox still works, so an attack that wedges the grader
fails the test that made it. Tests that need a Sandbox of their own (a new
fork-server) or that wait for a timeout are marked slow.
"""
from __future__ import annotations

import os
import signal
import socket
import tempfile
from pathlib import Path

import pytest
import torch

from grader.sandbox import Limits, Sandbox, policy
from probecalls import selftest_call, submission_folder

REPO = Path(__file__).resolve().parents[1]
LIMITS = Limits(timeout_s=6, cpu_s=2, memory_mb=2048, output_limit_kb=16, threads=2)
SECRET_ENV = "GRADER_REDTEAM_SECRET"


call, module = selftest_call, submission_folder
@pytest.fixture(scope="module")
def sandbox():
    os.environ[SECRET_ENV] = "hunter2"  # the grader's environment must not reach the child
    try:
        with Sandbox(LIMITS) as box:
            yield box
    finally:
        del os.environ[SECRET_ENV]


def still_works(sandbox: Sandbox, tmp_path: Path) -> None:
    folder = tmp_path / "healthy"
    folder.mkdir(exist_ok=True)
    (folder / "healthy.py").write_text("def one():\n    return 1\n")
    result = sandbox.run(folder, "healthy", [call("one")])
    assert (result.status, result.calls[0].value) == ("ok", 1), result.reason


def test_monkeypatching_torch_in_the_child_changes_nothing_in_the_grader(sandbox, tmp_path):
    source = """
import torch, torch.testing
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
def wrong(x):
    return x * 3
def right(x):
    return x * 2
def patched_here():
    return [torch.allclose(torch.zeros(1), torch.ones(1)), bool((torch.zeros(1) == torch.ones(1)).all())]
"""
    x = torch.randn(5)
    result = sandbox.run(module(tmp_path, source), "submission", [call("wrong", x), call("right", x),
                                                                   call("patched_here")])
    assert result.status == "ok"
    assert result.calls[2].value == [True, True]  # the patches are live in the child...
    assert not torch.allclose(result.calls[0].value, x * 2)  # ...and void here
    assert torch.equal(result.calls[1].value, x * 2)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(result.calls[0].value, x * 2)
    assert not bool((torch.zeros(1) == torch.ones(1)).all())


def test_a_tensor_subclass_or_an_odd_object_is_a_protocol_error_for_that_call(sandbox, tmp_path):
    source = """
import torch
class Liar(torch.Tensor):
    def __eq__(self, other):
        return True
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True
class Equal:
    def __eq__(self, other):
        return True
def liar():
    return torch.zeros(3).as_subclass(Liar)
def equal():
    return {"value": Equal()}
def fine():
    return 7
"""
    result = sandbox.run(module(tmp_path, source), "submission", [call("liar"), call("equal"), call("fine")])
    assert result.status == "ok"
    assert [(c.ok, c.error_type) for c in result.calls[:2]] == [(False, "ProtocolError")] * 2
    assert "subclass" in result.calls[0].error and "not plain data" in result.calls[1].error
    assert result.calls[2].value == 7


def test_a_forged_result_frame_with_a_code_running_pickle_is_refused(sandbox, tmp_path):
    marker = Path(tempfile.gettempdir()) / f"sandbox-redteam-marker-{os.getpid()}"
    source = f"""
import io, os, pickle, torch
from grader.sandbox import wire
class Payload:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
def forge(raw):
    buf = io.BytesIO()
    torch.save(Payload(), buf)
    payload = pickle.dumps(Payload()) if raw else buf.getvalue()
    os.write(4, wire.frame({{"kind": "result", "i": 0}}, payload=payload))
    os._exit(0)
"""
    folder = module(tmp_path, source)
    for raw in (False, True):
        result = sandbox.run(folder, "submission", [call("forge", raw), call("forge", raw)])
        # A frame beside the child's sender voids the run (tests/test_sandbox_tamper.py), unread.
        assert result.status == "tampered" and result.calls == [], result.reason
    assert not marker.exists()
    garbage = "import os\nos.write(4, b'\\x05\\x00\\x00\\x00' + bytes(8) + b'PASS!')\n"
    result = sandbox.run(module(tmp_path, garbage), "submission", [call("x")])
    assert result.status == "tampered"
    still_works(sandbox, tmp_path)


def test_the_repository_s_secrets_are_unreadable(sandbox, tmp_path):
    source = """
import os
def read(path):
    with open(path) as f:
        return f.read()
def listdir(path):
    return os.listdir(path)
def env():
    return dict(os.environ)
def import_grader():
    import grader.course
"""
    targets = [REPO / "solutions" / "01_softmax" / "softmax.py", REPO / "grader" / "course.py", REPO / "course.yaml",
               Path("/proc/1/environ"), Path(f"/proc/{os.getpid()}/cmdline"), Path("/etc/shadow")]
    calls = [call("read", str(p)) for p in targets]
    calls += [call("listdir", str(REPO)), call("listdir", str(REPO / "solutions")), call("env"), call("import_grader")]
    result = sandbox.run(module(tmp_path, source), "submission", calls)
    assert result.status == "ok"
    *reads, env, imported = result.calls
    for target, got in zip([*targets, REPO, REPO / "solutions"], reads):
        assert not got.ok and got.error_type in {"FileNotFoundError", "PermissionError"}, (target, got)
    assert SECRET_ENV not in env.value and not imported.ok


def test_gradebook_output_folder_and_repository_are_unwritable(sandbox, tmp_path):
    gradebook = tmp_path / "grades.db"
    gradebook.write_text("alice: 10")
    output = tmp_path / "grading"
    output.mkdir()
    (output / "report.html").write_text("<p>ok</p>")
    source = """
import os
def append(path):
    with open(path, "a") as f:
        f.write("alice: 100")
def remove(path):
    os.remove(path)
def create(path):
    open(path, "w").close()
"""
    calls = [call("append", str(gradebook)), call("remove", str(output / "report.html")),
             call("create", str(output / "new.html")), call("create", str(REPO / "tests" / "pwned.py")),
             call("append", str(REPO / "README.md")), call("create", "/tmp/sandbox-pwned")]
    result = sandbox.run(module(tmp_path, source), "submission", calls)
    assert result.status == "ok" and not any(c.ok for c in result.calls), result.calls
    assert gradebook.read_text() == "alice: 10" and sorted(os.listdir(output)) == ["report.html"]
    assert not (REPO / "tests" / "pwned.py").exists() and not Path("/tmp/sandbox-pwned").exists()


def test_sys_exit_and_os_exit_at_import_and_in_a_call(sandbox, tmp_path):
    for source, status, words in (("import sys\nsys.exit(0)\n", "import_error", "SystemExit"),
                                  ("import os\nos._exit(0)\n", "crashed", "while importing")):
        result = sandbox.run(module(tmp_path, source), "submission", [call("f")])
        assert result.status == status and words in result.reason and result.calls == []
    source = "import os, sys\ndef leave():\n    sys.exit(0)\ndef vanish():\n    os._exit(0)\ndef one():\n    return 1\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("leave"), call("one"), call("vanish"),
                                                                   call("one")])
    assert result.status == "crashed" and "during call 3" in result.reason
    assert [(c.ok, c.error_type) for c in result.calls] == [(False, "SystemExit"), (True, None)]
    still_works(sandbox, tmp_path)


def test_printing_fake_pass_lines_has_no_effect(sandbox, tmp_path):
    source = """
import sys
print("PASSED 10/10", "status: ok", '{"kind": "done"}', sep="\\n")
def f():
    print("test_everything PASSED"); print("ok", file=sys.stderr)
    raise ValueError("actually wrong")
"""
    result = sandbox.run(module(tmp_path, source), "submission", [call("f")])
    assert result.calls[0].ok is False and result.calls[0].error_type == "ValueError"
    assert "PASSED 10/10" in result.stdout


@pytest.mark.slow
def test_an_infinite_loop_and_a_sleep_time_out_and_the_grader_carries_on(sandbox, tmp_path):
    source = "import time\ndef spin():\n    while True:\n        pass\ndef nap():\n    time.sleep(600)\n" \
             "def one():\n    return 1\n"
    folder = module(tmp_path, source)
    spin = sandbox.run(folder, "submission", [call("spin")])
    # RLIMIT_CPU (2 s) or the wall clock (6 s), whichever comes first on a busy machine.
    assert spin.status == "timeout" and ("CPU time" in spin.reason or "timed out" in spin.reason)
    nap = sandbox.run(folder, "submission", [call("one"), call("one"), call("nap"), call("one")])
    assert nap.status == "timeout" and "timed out after 6 s during call 3" in nap.reason
    assert [c.value for c in nap.calls] == [1, 1]  # the calls before the hang are kept
    assert nap.wall_s < LIMITS.timeout_s + 3
    still_works(sandbox, tmp_path)


def test_allocating_10_gib_is_a_memory_status(sandbox, tmp_path):
    source = "import torch\ndef tensor():\n    return torch.ones(10 * 2**30, dtype=torch.uint8).sum()\n" \
             "def buffer():\n    return len(bytearray(10 * 2**30))\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("tensor"), call("buffer")])
    assert result.status == "memory" and "2048 MiB" in result.reason
    assert [c.ok for c in result.calls] == [False, False]
    still_works(sandbox, tmp_path)


@pytest.mark.slow
def test_running_out_of_memory_stays_the_cause_when_a_later_call_hangs(sandbox, tmp_path):
    # The first mistake is the one named: a run that ran out of memory and
    # then ran out of time (a hoard that makes every later call slow) is a
    # memory verdict that names the call that ran out, then how the run ended.
    source = "import time, torch\ndef tensor():\n    return torch.ones(10 * 2**30, dtype=torch.uint8).sum()\n" \
             "def nap():\n    time.sleep(600)\ndef spin():\n    while True:\n        pass\n"
    folder = module(tmp_path, source)
    nap = sandbox.run(folder, "submission", [call("tensor"), call("nap")])
    assert nap.status == "memory" and nap.reason.startswith("call 1 (") and "2048 MiB" in nap.reason
    assert "then timed out after 6 s during call 2" in nap.reason
    spin = sandbox.run(folder, "submission", [call("tensor"), call("spin")])
    # RLIMIT_CPU (2 s) or the wall clock (6 s), whichever comes first on a busy machine.
    assert spin.status == "memory" and spin.reason.startswith("call 1 (")
    assert "then used more than 2 s of CPU time during call 2" in spin.reason or "then timed out" in spin.reason
    still_works(sandbox, tmp_path)


def test_no_new_processes_or_programs(sandbox, tmp_path):
    marker = Path(tempfile.gettempdir()) / f"sandbox-redteam-system-{os.getpid()}"
    source = f"""
import multiprocessing, os, subprocess
def bomb():
    while True:
        os.fork()
def system():
    return os.system("touch {marker}")
def run():
    return subprocess.run(["touch", "{marker}"]).returncode
def execv():
    os.execv("/bin/sh", ["sh", "-c", "touch {marker}"])
def pool():
    with multiprocessing.Pool(2) as p:
        return p.map(abs, [-1])
"""
    result = sandbox.run(module(tmp_path, source), "submission",
                         [call("bomb"), call("system"), call("run"), call("execv"), call("pool")])
    bomb, system, run, execv, pool = result.calls
    assert result.status == "ok" and system.ok and system.value != 0
    assert not any(c.ok for c in (bomb, run, execv, pool)) and not marker.exists()
    assert bomb.error_type == "PermissionError"
    still_works(sandbox, tmp_path)


def test_a_thread_bomb_fails_inside_the_child(sandbox, tmp_path):
    source = """
import threading, time
def bomb():
    started = 0
    try:
        for _ in range(100_000):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            started += 1
    except RuntimeError as exc:
        return [started, str(exc)]
"""
    result = sandbox.run(module(tmp_path, source), "submission", [call("bomb")])
    assert result.status == "ok" and result.calls[0].ok, result
    started, error = result.calls[0].value
    assert started < 100_000 and "can't start new thread" in error
    still_works(sandbox, tmp_path)


def test_sockets_reach_nothing(sandbox, tmp_path):
    received: list[bytes] = []
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = Path(tempfile.gettempdir()) / f"sandbox-redteam-{os.getpid()}.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    os.chmod(unix_path, 0o777)
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0sandbox-redteam-{os.getpid()}")
    abstract.listen()
    for s in (tcp, udp, unix, abstract):
        s.settimeout(0.5)
    source = """
import socket
def tcp(port):
    socket.create_connection(("127.0.0.1", port), timeout=2).sendall(b"EXFIL")
def udp(port):
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"EXFIL", ("127.0.0.1", port))
def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); s.sendall(b"EXFIL")
def dns():
    return socket.getaddrinfo("example.com", 80)
"""
    try:
        calls = [call("tcp", tcp.getsockname()[1]), call("udp", udp.getsockname()[1]), call("unix", str(unix_path)),
                 call("unix", f"\0sandbox-redteam-{os.getpid()}"), call("dns")]
        result = sandbox.run(module(tmp_path, source), "submission", calls)
        for server in (tcp, unix, abstract):
            try:
                received.append(server.accept()[0].recv(100))
            except (TimeoutError, OSError):
                pass
        try:
            received.append(udp.recv(100))
        except (TimeoutError, OSError):
            pass
    finally:
        for s in (tcp, udp, unix, abstract):
            s.close()
        unix_path.unlink()
    assert result.status == "ok" and not any(c.ok for c in result.calls), result.calls
    assert received == []


def test_signals_and_tracing_cannot_reach_the_grader_or_the_server(sandbox, tmp_path):
    source = """
import ctypes, os, signal
def kill(pid, sig):
    os.kill(pid, sig)
def stop_parent():
    os.kill(os.getppid(), signal.SIGSTOP)
def kill_all():
    os.kill(-1, signal.SIGKILL)
def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.ptrace(16, pid, None, None), ctypes.get_errno()]  # PTRACE_ATTACH
"""
    grader = os.getpid()
    calls = [call("kill", grader, int(signal.SIGSTOP)), call("stop_parent"), call("kill_all"), call("ptrace", grader)]
    result = sandbox.run(module(tmp_path, source), "submission", calls)
    *signals, ptrace = result.calls
    assert all(not c.ok and c.error_type in {"PermissionError", "ProcessLookupError"} for c in signals), signals
    assert ptrace.value[0] == -1
    still_works(sandbox, tmp_path)


def test_asking_for_64_threads_does_not_hurt_the_grader(sandbox, tmp_path):
    source = "import torch\ndef many():\n    torch.set_num_threads(64)\n    x = torch.randn(300, 300)\n" \
             "    return float((x @ x).sum())\n"
    result = sandbox.run(module(tmp_path, source), "submission", [call("many")])
    assert result.status in {"ok", "memory", "crashed"}
    if result.status == "ok" and result.calls[0].ok:
        assert isinstance(result.calls[0].value, float)
    still_works(sandbox, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("only", ["filesystem_view", "landlock"])
def test_each_filesystem_layer_alone_keeps_the_secrets(only, tmp_path):
    """Landlock and the mount-namespace view are two independent walls."""
    other = {"filesystem_view": ["landlock"], "landlock": ["namespaces"]}[only]
    source = "def read(path):\n    return open(path).read()\n" \
             "def write(path):\n    open(path, 'w').write('x')\n"
    # Without the view a root grader's child reads the folder as the dropped uid.
    folder = Path(tempfile.mkdtemp(prefix="sandbox-redteam-"))
    try:
        os.chmod(folder, 0o755)
        (folder / "submission.py").write_text(source)
        os.chmod(folder / "submission.py", 0o644)
        with Sandbox(LIMITS, disable=other) as box:
            assert box.layers()[only] == "active"
            calls = [call("read", str(REPO / "solutions" / "01_softmax" / "softmax.py")),
                     call("write", str(REPO / "pwned.txt")), call("read", str(folder / "submission.py"))]
            result = box.run(folder, "submission", calls)
        assert [c.ok for c in result.calls] == [False, False, True], result.calls
        assert not (REPO / "pwned.txt").exists()
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def test_the_policy_never_lists_the_repository_root(sandbox):
    read = policy.read_paths([str(REPO), ""], [])
    assert str(REPO) not in read and str(REPO / "grader") not in read
