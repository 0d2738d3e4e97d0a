"""The fork-server: ``python -m grader.sandbox.server --fd N``.

Started by exec'ing a fresh interpreter with a scrubbed environment, so
nothing of the grader (hidden checks, references, open files) is in its
memory or fds. It imports torch once, and each probe module the first time
a run names one (``spec["probes"]``, before that run's child is forked), warms up under
``torch.set_num_threads(1)`` (libgomp's thread pool is not fork-safe:
a parent that ran a parallel op makes children hang, research §6), then
forks one child per run.

Control messages are JSON over a SOCK_SEQPACKET socket; a ``run`` message
carries the child's four pipe ends as SCM_RIGHTS, so inputs and results
travel between the grader and the child directly and never through here.

    -> {"op": "configure", "config": {...}}        (what every run shares: limits, paths, uid)
    -> {"op": "run", "id": n, "spec": {...}} + fds  <- {"op": "started", "id": n, "pid": p}
    -> {"op": "reap", "id": n}                      <- {"op": "reaped", "id": n, "status": s, "cpu_s": t}
    -> {"op": "release", "id": n}                   (no reply: the grader needs no status)

The server never reaps a child unless asked, so a pid the grader holds
cannot be recycled under it: its ``killpg`` always hits the right group.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time


def warm_up() -> dict:
    """Import and exercise what every child uses (torch, the module loader,
    the dispatcher recorder), so children need no lazy imports (and no lazy
    thread pools) after confinement. The probe modules a run names come
    later, before its child is forked (:func:`load_probes`).

    The garbage collector is paused meanwhile, and what the warm-up
    leaves is frozen when it ends (coursekit/heap.py), as is what
    :func:`load_probes` imports: a garbage collection in a child would
    otherwise touch (and copy-on-write) the whole heap, which measured
    650 ms and 18k page faults per child here. (No collection first: it
    cost 85 ms of the start-up, to free a little memory the server would
    keep anyway.)"""
    from coursekit.heap import frozen_imports

    started = time.perf_counter()
    with frozen_imports():
        return _warm_up(started)


def _warm_up(started: float) -> dict:
    import torch
    from torch import nn

    import coursekit.loader  # noqa: F401 - children use it
    from coursekit.probes import dispatch, warm

    warm.pay_at_import()  # the probe modules imported later warm up here, once, not in each child
    from grader.sandbox import child, wire  # noqa: F401 - children use it

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Dropout(0.1), nn.LayerNorm(8), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    # Forward and backward; no optimiser step: its first use imports
    # torch._dynamo (~1 s), paid by the probe modules whose calls step one.
    loss = nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 0, 1]))
    (loss + torch.softmax(x @ x.T / 8**0.5, dim=-1).sum() * 0).backward()
    # Both observers' first use (the profiler's set-up, the mode's stack) is
    # paid here, not in each child's first recorded call.
    for python_dispatch in (True, False):
        with dispatch.recording(python_dispatch=python_dispatch):
            dispatch.canary(None)
    warm.operators()  # the operators children run, each built once here
    wire.loads(wire.dumps({"x": x, "d": torch.float32, "t": (1, 2.0, "s", None, [True])}))
    status = open("/proc/self/status").read()
    vm_kb = int(status.split("VmSize:")[1].split()[0]) if "VmSize:" in status else 0
    return {"torch": torch.__version__, "python": sys.version.split()[0], "warmup_s": time.perf_counter() - started,
            "vm_mb": vm_kb >> 10, "pid": os.getpid(), "euid": os.geteuid(), "sys_path": sys.path,
            "executable": sys.executable}


def load_probes(names: object) -> bool:
    """Import the probe modules a run names that this server has not yet
    imported (a module's import may warm up what it needs: the placement
    probe loads the meta-device kernels, ~1 s, once per server). Whether
    anything new was imported: the spare forked before it lacks it. Names
    outside the probe library are ignored; a module that fails to import is
    left for the child to report, as its call's error."""
    import importlib

    from coursekit.heap import frozen_imports
    from grader.sandbox.requests import PROBE_PACKAGE

    if not isinstance(names, list):
        return False
    new = [n for n in names if isinstance(n, str) and n.startswith(PROBE_PACKAGE) and n not in sys.modules
           and all(part.isidentifier() for part in n.split("."))]
    before = len(sys.modules)
    with frozen_imports():  # as in warm_up: frozen for the children; imports (sympy's) make little garbage
        for name in new:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the child's own import of it raises the same, per call
                pass
    if len(sys.modules) == before:  # nothing new (a module that keeps failing costs no fresh spare)
        return False
    return True


class _Spares:
    """One child forked ahead of time, already in its namespaces with its
    read-only view mounted, so that a run pays neither for the fork (~10 ms
    for a torch-sized process here) nor for the bind mounts."""

    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.config: dict | None = None
        self.ready: tuple[int, socket.socket] | None = None

    def fork(self) -> tuple[int, socket.socket]:
        from grader.sandbox import child

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            self.ctl.close()
            ours.close()
            child.spare(theirs, self.config, server_pid)  # never returns
        theirs.close()
        return pid, ours

    def take(self) -> tuple[int, socket.socket]:
        """The ready spare (or a fresh one); the caller owns it."""
        ready, self.ready = self.ready, None
        return ready or self.fork()

    def refill(self) -> None:
        if self.ready is None and self.config is not None:
            self.ready = self.fork()

    def discard(self) -> int | None:
        """Drop the ready spare (it exits when its socket closes); its pid, to reap."""
        ready, self.ready = self.ready, None
        if ready is None:
            return None
        ready[1].close()
        return ready[0]


COLLAPSE_AFTER = 10


def serve(ctl: socket.socket) -> None:
    """Answer control messages until the grader closes its end."""
    from grader.sandbox import hugeheap, seccomp

    spares = _Spares(ctl)
    children: dict[int, int] = {}
    released: list[int] = []
    # The heap in huge pages makes each later fork and child cheaper: ~0.3 s
    # of this process's time, repaid after ~100 runs (~2.5 ms each), so begun
    # after the COLLAPSE_AFTER-th run (a class of one never pays for it), one
    # 2 MiB piece whenever no message waits (done at once, it kept runs from
    # starting); again after a probe module's import adds to the heap.
    runs_to_collapse: int | None = COLLAPSE_AFTER  # None: collapsed (or under way), nothing added since
    to_collapse: list[tuple[int, int]] = []
    while True:
        released = [pid for pid in released if not _reaped_now(pid)]
        if to_collapse and not select.select([ctl], [], [], 0)[0]:
            hugeheap.collapse_piece(to_collapse.pop())
            continue
        if released and not select.select([ctl], [], [], 0.05)[0]:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 8)
        except (ConnectionError, OSError):
            data, fds = b"", []
        if not data:
            break
        message = json.loads(data)
        if message["op"] == "configure":
            old = spares.discard()
            released += [old] if old else []
            spares.config = message["config"]
            seccomp.program(spares.config.get("seccomp_log", False))  # its template, built once here for every child
            spares.refill()
        elif message["op"] == "run":
            if load_probes(message["spec"].get("probes")):
                old = spares.discard()
                released += [old] if old else []
                if runs_to_collapse is None:
                    runs_to_collapse = COLLAPSE_AFTER - 1
            try:
                pid = _hand_over(spares, message["spec"], fds, released)
            except OSError as exc:
                _reply(ctl, {"op": "failed", "id": message["id"], "error": str(exc)})
                continue
            finally:
                _close(fds)
            children[message["id"]] = pid
            _reply(ctl, {"op": "started", "id": message["id"], "pid": pid})
            spares.refill()  # while the run runs
            if runs_to_collapse is not None:
                runs_to_collapse -= 1
                if runs_to_collapse == 0:
                    to_collapse, runs_to_collapse = hugeheap.pieces()[::-1], None  # popped from the lowest: the heap first
        elif message["op"] == "release":  # killed and no status wanted: reap whenever it is gone
            pid = children.pop(message["id"], None)
            if pid:
                released.append(pid)
        elif message["op"] == "reap":
            pid = children.pop(message["id"], None)
            status, cpu_s = _reap(pid) if pid else (None, None)
            _reply(ctl, {"op": "reaped", "id": message["id"], "status": status, "cpu_s": cpu_s})
    spare = spares.discard()
    for pid in [*children.values(), *released, *([spare] if spare else [])]:
        for kill in (os.killpg, os.kill):  # the grader went away: take the children with us
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap(pid)


def _hand_over(spares: _Spares, spec: dict, fds: list[int], released: list[int]) -> int:
    """Give a run to a spare child; its pid."""
    if spares.config is None:
        raise OSError("the sandbox was not configured")
    for attempt in range(2):
        pid, sock = spares.take()
        try:
            socket.send_fds(sock, [json.dumps(spec).encode()], fds)
            return pid
        except OSError:  # that spare died while waiting: use a fresh one
            released.append(pid)
            if attempt:
                raise
        finally:
            sock.close()
    raise AssertionError("unreachable")


def _reap(pid: int) -> tuple[int | None, float | None]:
    """Wait for a (killed) child: its wait status and the CPU seconds it used."""
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return None, None
    return status, usage.ru_utime + usage.ru_stime


def _reaped_now(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _reply(ctl: socket.socket, message: dict) -> None:
    ctl.sendall(json.dumps(message).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="the control socket inherited from the grader")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the grader, which then closes the socket
    ctl = socket.socket(fileno=args.fd)
    try:
        info = warm_up()
    except BaseException as exc:
        _reply(ctl, {"op": "error", "error": f"{type(exc).__name__}: {exc}"})
        raise
    _reply(ctl, {"op": "ready", **info})
    serve(ctl)
    # Its children are killed and reaped; the interpreter's teardown of a
    # torch-sized process (~0.4 s of CPU) would only keep the grader's
    # Sandbox.close waiting.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
