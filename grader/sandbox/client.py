"""The grader's side: :class:`Sandbox` starts the fork-server, sends runs,
enforces the wall clock and the output cap, and decodes results.

Nothing the child writes decides a result except decoded frames: not its
exit code, not its output, not its files. The child's pids are killed by
process group from here (the grader), so a child that stops or confuses
the fork-server still cannot outlive its timeout.
"""
from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from grader.sandbox import policy, prestart, runstate, seccomp, syscalls, wire
from grader.sandbox.requests import CallFrames, batch_sizes, probe_modules
from grader.sandbox.model import CallResult, Limits, ProbeCall, RunResult
from grader.sandbox.runstate import RunState

log = logging.getLogger("grader.sandbox")
DEFAULT_UID = 65534
_START_TIMEOUT_S = 180.0   # import torch + warm-up, on a loaded laptop
_CONTROL_TIMEOUT_S = 60.0
# Tries to start one run when its server dies first (each on a fresh server):
# with --jobs N, a thread's first try can meet one death and its retry the next.
_RUN_START_TRIES = 3
# How long a child whose result stream ended may take to become a zombie
# before the grader counts it as alive (it closed the stream itself).
_HANG_UP_GRACE_S = 0.5


class _KilledAtStart(Exception):
    """The fork-server was killed from outside before it said it was ready."""


class SandboxError(Exception):
    """The sandbox itself failed (the fork-server did not start or died)."""


class Sandbox:
    """Runs probes on untrusted modules in confined children of a fork-server.

    Use as a context manager, or call :meth:`close`. ``run`` may be called
    from several threads at once. ``allow_read``: extra readable paths (they
    may not contain the repository); ``scratch_root``: where per-run folders
    are made (default: the system temp folder); ``uid``/``gid``: who the
    child becomes when the grader is root (default 65534, or
    ``GRADER_SANDBOX_UID``); ``disable``: layer names to skip (tests and
    ``doctor``; also ``GRADER_SANDBOX_DISABLE=a,b``).
    """

    def __init__(self, limits: Limits, *, allow_read: Sequence[Path] = (), scratch_root: Path | None = None,
                 uid: int | None = None, gid: int | None = None, disable: Sequence[str] = ()) -> None:
        self.limits = limits
        self._allow_read = [Path(p) for p in allow_read]
        policy.read_paths([], self._allow_read)  # fail early on a path that exposes the repository
        self._scratch_root = Path(scratch_root or tempfile.gettempdir())
        env_uid = os.environ.get("GRADER_SANDBOX_UID")
        self._uid = uid if uid is not None else int(env_uid) if env_uid else DEFAULT_UID
        self._gid = gid if gid is not None else self._uid
        env_disable = [d for d in os.environ.get("GRADER_SANDBOX_DISABLE", "").split(",") if d]
        self._disable = sorted({*disable, *env_disable})
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._waiters: dict[int, queue.Queue] = {}
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._ctl: socket.socket | None = None
        self._info: dict = {}
        self._root_dir: str | None = None
        self._layers: dict[str, str] = {}
        self._warned = False
        # Control sockets whose server hung up, and the socket each run's
        # request went to: with --jobs N several threads share one server, and
        # a server's death must fail only its own runs, never a restarted one's.
        self._dead: set[socket.socket] = set()
        self._sent_to: dict[int, socket.socket] = {}
        self._running: dict[int, int] = {}  # run id -> the child's pid, while it runs
        self._frames = CallFrames()

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fork-server (its running children are killed with it)."""
        with self._lock:
            proc, ctl = self._proc, self._ctl
            self._proc = self._ctl = None
        if ctl is not None:
            try:
                ctl.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            ctl.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._root_dir is not None:
            shutil.rmtree(self._root_dir, ignore_errors=True)
            self._root_dir = None

    def _server(self) -> socket.socket:
        """The control socket of a running fork-server, started if needed."""
        with self._lock:
            if self._ctl is not None and self._proc is not None and self._proc.poll() is None \
                    and self._ctl not in self._dead:
                return self._ctl
            if not syscalls.LINUX:
                raise SandboxError("the sandbox needs Linux (namespaces, Landlock, seccomp)")
            try:
                return self._start_server()
            except _KilledAtStart:  # kill -9 or the OOM killer while it imported torch: once more
                return self._start_server()

    def _start_server(self) -> socket.socket:
        """Start a fork-server and configure it; the caller holds ``_lock``."""
        # One started early (grader grade, before its own imports) or a fresh one.
        proc, ours = prestart.take() or prestart.spawn()
        ours.settimeout(_START_TIMEOUT_S)
        try:
            ready = json.loads(ours.recv(1 << 20) or b"{}")
        except (OSError, ValueError) as exc:
            ready = {"op": "error", "error": str(exc)}
        if ready.get("op") != "ready":
            proc.kill()
            killed = proc.wait() == -signal.SIGKILL and "error" not in ready
            ours.close()
            if killed:
                raise _KilledAtStart()
            raise SandboxError(f"the sandbox fork-server did not start: {ready.get('error', 'no reply')}")
        ours.settimeout(None)
        self._info = ready
        read = policy.read_paths(ready["sys_path"], self._allow_read)
        if self._root_dir is not None:  # a server that died: its mount point is free again
            shutil.rmtree(self._root_dir, ignore_errors=True)
        self._root_dir = tempfile.mkdtemp(prefix="sandbox-root-", dir=self._scratch_root)
        config = {"root": self._root_dir, "read": read, "devices": list(policy.DEVICES),
                  "limits": vars(self.limits), "uid": self._uid, "gid": self._gid, "disable": self._disable,
                  "seccomp_log": os.environ.get(seccomp.LOG_ENV) == "1"}
        ours.sendall(json.dumps({"op": "configure", "config": config}).encode())
        self._proc, self._ctl = proc, ours
        threading.Thread(target=self._dispatch, args=(ours,), daemon=True, name="sandbox-dispatch").start()
        return ours

    def _dispatch(self, ctl: socket.socket) -> None:
        """Route the server's replies to the runs waiting for them."""
        while True:
            try:
                data = ctl.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            waiter = self._waiters.get(message.get("id"))
            if waiter is not None:
                waiter.put(message)
        self._dead.add(ctl)
        for run_id, waiter in list(self._waiters.items()):
            if self._sent_to.get(run_id) is ctl:
                waiter.put({"op": "dead", "server": ctl})

    def _forget_server(self, failed: socket.socket | None) -> None:
        """Drop the fork-server behind ``failed`` if it is still the current
        one, so the next call starts a fresh one (another thread may have
        started that already: it is kept)."""
        with self._lock:
            if failed is None or self._ctl is not failed:
                return
            proc, ctl = self._proc, self._ctl
            self._proc = self._ctl = None
            self._dead.discard(ctl)
        if proc is not None:
            proc.kill()
            proc.wait()
        if ctl is not None:
            try:
                ctl.shutdown(socket.SHUT_RDWR)  # wakes the dispatcher thread
            except OSError:
                pass
            ctl.close()

    def _send(self, message: dict, fds: Sequence[int] = ()) -> bool:
        """Send to the server of this run (a run starts one if needed; a reap
        or release goes to the run's own server: one that died took its
        children with it)."""
        run_id = message["id"]
        if message["op"] == "run":
            ctl = self._sent_to[run_id] = self._server()
        else:
            ctl = self._sent_to.get(run_id)
        if ctl is None or ctl in self._dead:
            return False
        with self._send_lock:
            try:
                socket.send_fds(ctl, [json.dumps(message).encode()], list(fds))
            except OSError:
                return False
        return True

    def _request(self, run_id: int, message: dict, fds: Sequence[int] = ()) -> dict:
        if not self._send(message, fds):
            return {"op": "dead"}
        server = self._sent_to.get(run_id)
        deadline = time.monotonic() + _CONTROL_TIMEOUT_S
        while True:
            try:
                reply = self._waiters[run_id].get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return {"op": "dead"}
            if reply.get("op") == "dead" and reply.get("server") is not server:
                continue  # the death of the server an earlier try of this run went to
            return reply

    # -- runs -----------------------------------------------------------------

    def layers(self) -> dict[str, str]:
        """Layer name -> "active" or "missing: reason", as the last run's
        child reported them (a trivial run is made when none has run yet)."""
        for _ in range(3):  # a try killed from outside (kill -9, OOM) reports nothing
            if self._layers:
                break
            with tempfile.TemporaryDirectory(prefix="sandbox-layers-") as folder:
                os.chmod(folder, 0o755)
                Path(folder, "empty_module.py").write_text("")
                self.run(Path(folder), "empty_module", [])
        return dict(self._layers)

    def running(self) -> list[int]:
        """The pids of the children running now (an operator's view: what
        ``kill -9`` would hit; tests use it to play the OOM killer)."""
        return list(self._running.values())

    def info(self) -> dict:
        """The fork-server's interpreter, torch version and warm-up time."""
        self._server()
        return {k: v for k, v in self._info.items() if k != "op"}

    def run(self, folder: Path, module_name: str, calls: Sequence[ProbeCall],
            batches: Sequence[int] | None = None, timeout_s: float | None = None) -> RunResult:
        """Import ``folder/module_name.py`` in a fresh confined child and run
        each call there; see :class:`RunResult`.

        ``batches``: how many consecutive calls go to the child together
        (e.g. one check's calls; they must add up to ``len(calls)``); the
        default sends one call at a time. Either way no input is sent before
        the module is imported, nor a batch before the previous batch is
        answered, and each call is answered and fails on its own. One round
        trip per batch instead of per call: ~3 ms a call on 2 busy cores.

        ``timeout_s``: a shorter wall clock than the limits' for this run (never a longer one)."""
        folder = Path(folder).resolve()
        module_name = module_name.removesuffix(".py")
        if not module_name.isidentifier():
            raise ValueError(f"not a module name: {module_name!r}")
        if folder == policy.REPO_ROOT or folder in policy.REPO_ROOT.parents:
            # The child gets a copy of its folder: this one holds grader/ and solutions/.
            raise ValueError(f"the module's folder {folder} contains the repository")
        if not (folder / f"{module_name}.py").is_file():
            return RunResult("import_error", [], f"{module_name}.py is missing from {folder.name}/", "", "", 0.0)
        # Sent a batch at a time once the child has imported the module (RunState.pump).
        try:
            call_frames = self._frames.batches(calls, batch_sizes(len(calls), batches))
        except wire.ProtocolError as exc:
            raise ValueError(f"probe kwargs must be plain data: {exc}") from None
        probes = probe_modules(calls)
        self._server()
        started = time.monotonic()  # the wall clock starts once the fork-server is up
        oom_kills = runstate.oom_kill_count()
        run_dir = Path(tempfile.mkdtemp(prefix="sandbox-run-", dir=self._scratch_root))
        if os.geteuid() == 0:  # without a mount namespace the dropped uid writes here directly
            os.chmod(run_dir, 0o711)
        run_id = next(self._ids)
        self._waiters[run_id] = queue.Queue()
        state = RunState(self.limits, [c.probe for c in calls], module_name)
        pid, child_ends, ours = None, [], []
        try:
            for attempt in range(_RUN_START_TRIES):
                # Fresh pipes and scratch each try: a server that died after
                # forking leaves an orphaned child holding the last try's
                # (it wrote a second layers report into a retried run once).
                _close_all(child_ends + ours)
                child_ends, ours = _run_pipes()
                scratch = run_dir / f"scratch{attempt}"
                scratch.mkdir()
                if os.geteuid() == 0:
                    os.chown(scratch, self._uid, self._gid)
                spec = {"module_dir": str(folder), "module_name": module_name, "scratch": str(scratch),
                        "probes": probes}
                reply = self._request(run_id, {"op": "run", "id": run_id, "spec": spec}, child_ends)
                if reply.get("op") != "dead":
                    break
                # The server died since the last run, or before it started this one: a fresh server.
                self._forget_server(self._sent_to.get(run_id))
            _close_all(child_ends)
            child_ends = []
            if reply.get("op") != "started":
                raise SandboxError(f"the fork-server could not start a run: {reply.get('error', 'it died')}")
            pid = self._running[run_id] = state.pid = reply["pid"]
            deadline = time.monotonic() + min(self.limits.timeout_s, timeout_s or self.limits.timeout_s)
            state.pump(ours, call_frames, deadline=deadline)
            if state.hung_up and not state.done:
                # Its result stream ended early: did it die, or close it and live on?
                state.lived_on = not runstate.ends_within(pid, _HANG_UP_GRACE_S)
        finally:
            _close_all(child_ends)
            wait = None
            if pid is not None:
                _kill_group(pid)
                if state.done:
                    # Its output was flushed before "done": take what is in the
                    # pipes now, and let the server reap it while we go on
                    # (tearing down a torch-sized address space takes ~10 ms).
                    self._send({"op": "release", "id": run_id})
                    state.drain(ours, wait_for_eof=False)
                else:
                    wait = self._request(run_id, {"op": "reap", "id": run_id})
                    state.drain(ours)
            _close_all(ours)
            self._running.pop(run_id, None)
            del self._waiters[run_id]
            self._sent_to.pop(run_id, None)
            shutil.rmtree(run_dir, ignore_errors=True)
        result = state.result(wait, wall_s=time.monotonic() - started,
                              oom_kills=runstate.oom_kill_count() - oom_kills)
        if state.layers:
            self._note_layers(state.layers)
        return result

    def _note_layers(self, layers: dict[str, str]) -> None:
        self._layers = layers
        missing = {k: v for k, v in layers.items() if not v.startswith("active")}
        if missing and not self._warned:
            self._warned = True
            log.warning("sandbox layers missing (run `python -m grader doctor`): %s",
                        "; ".join(f"{k}: {v}" for k, v in missing.items()))


# The result pipe's size: the child writes up to half of it unread before it
# asks the grader to read as it writes (grader/sandbox/child.py: the bell).
RESULT_PIPE_BYTES = 256 * 1024


def _run_pipes() -> tuple[list[int], list[int]]:
    """The child's ends and ours of the call, result, stdout, stderr and bell pipes."""
    pipes = [os.pipe() for _ in range(5)]
    try:
        fcntl.fcntl(pipes[1][0], fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)
    except OSError:  # over the user's pipe quota: the default 64 KiB still works
        pass
    return [pipes[0][0], *(w for _, w in pipes[1:])], [pipes[0][1], *(r for r, _ in pipes[1:])]


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (and the child, in case it died or
    was killed before its setsid): the child is unreaped, so neither id can
    have been recycled."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


__all__ = ["CallResult", "Limits", "ProbeCall", "RunResult", "Sandbox", "SandboxError"]
