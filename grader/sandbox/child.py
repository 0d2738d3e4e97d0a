"""One sandboxed run, in a child forked by the fork-server.

The server forks a *spare* child ahead of time; it leaves the server's
session, unshares its namespaces and mounts the read-only part of its
filesystem view, then waits for a run. When one comes it finishes
confining itself (module copy and scratch, pivot_root, rlimits, Landlock,
uid, seccomp, in that order), reports which layers took, and only then
imports the module, says ``imported``, and only then receives the probe
calls, a batch at a time (one check's calls, or one call), answering each
call with one frame. It never returns: it ends with ``os._exit``.

fds when the student's code runs: 0 = /dev/null, 1 and 2 = capped pipes
read by the grader, 3 = the calls (written by the grader a batch at a time,
never before the import), 4 = the result frames, 5 = the bell. Nothing else.

Each result frame is written as its call ends, so whatever happens next (a
hang, a crash, a kill) the grader finds every finished call's result in the
pipe. It does not wake up for each one: it reads the pipe when the child
rings the bell (one byte) before waiting for the next batch, when output or
the deadline wakes it, and throughout once the child rings that a lot is
coming (more than half the pipe: otherwise the child could block on a full
pipe nobody reads). One wake-up per batch instead of one per call.
"""
from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import traceback

from grader.sandbox import landlock, limits, namespaces, seccomp, syscalls, wire
from grader.sandbox.requests import PROBE_PACKAGE

REQUEST_FD, RESULT_FD, BELL_FD = 3, 4, 5
WAITING, STREAMING = b"w", b"s"  # the bell's words: read what I sent, I wait for you / read as I write


def spare(ctl: socket.socket, config: dict, server_pid: int) -> None:
    """Entry point of a spare child; never returns."""
    try:
        os.setsid()  # its own session and process group: the grader kills the group
        limits.die_with_parent(server_pid)
        keep = ctl.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 20)
        layers: dict[str, str] = {"fork_server": "active", "session": "active"}
        mounted = _prepare(config, layers)
        filter_program = seccomp.program(config["seccomp_log"])  # the server's template with this pid, while idle
        data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 8)
        ctl.close()
        if not data or len(fds) != 5:
            os._exit(0)  # the server is gone, or sent no run
        _run({**config, **json.loads(data), "seccomp_program": filter_program}, layers, mounted, fds, server_pid)
    except BaseException:
        os._exit(1)


def _attempt(layers: dict[str, str], disabled: set[str], name: str, fn, *args):
    """Apply one layer; a failing layer degrades (reported), never aborts."""
    if name in disabled:
        layers[name] = "missing: disabled by configuration"
        return None
    try:
        result = fn(*args)
        layers[name] = "active"
        return result
    except namespaces.SnapshotError:
        raise  # the module's fault, not the layer's: reported as an import error
    except Exception as exc:
        layers[name] = f"missing: {wire.one_line(exc)}"
        return None


def _prepare(config: dict, layers: dict[str, str]) -> bool:
    """Namespaces and the read-only view; whether the view is mounted."""
    disabled = set(config["disable"])
    if _attempt(layers, disabled, "namespaces", namespaces.enter, os.geteuid() == 0) is None:
        layers["filesystem_view"] = "missing: no mount namespace"
        return False
    _attempt(layers, disabled, "filesystem_view", namespaces.build_base,
             config["root"], config["read"], config["devices"])
    return layers["filesystem_view"] == "active"


def _run(spec: dict, layers: dict[str, str], mounted: bool, fds: list[int], server_pid: int) -> None:
    try:
        _arrange_fds(fds)
        _confine(spec, layers, mounted, server_pid)
        _send({"kind": "layers", "layers": layers})
        if "snapshot_error" in spec:
            _send({"kind": "import_error", "error": spec["snapshot_error"]})
        else:
            _serve(spec)
        _flush()  # output before "done": the grader does not wait for more after it
        _send({"kind": "done"})
    except BaseException as exc:  # our own failure (or a student's BaseException escaping)
        try:
            _send({"kind": "fatal", "error": wire.one_line(exc)})
            os.write(2, traceback.format_exc().encode(errors="replace")[-4000:])
        except BaseException:
            pass
    finally:
        _flush()
        _results.ring(WAITING)  # the grader reads the last frames now, not when the exit closes the pipe
        os._exit(0)


def _arrange_fds(fds: list[int]) -> None:
    """fds = [request, result, stdout, stderr, bell] from the grader; put
    them in place and close everything else (fds inherited through fork
    stay open and readable otherwise, O_CLOEXEC or not)."""
    import fcntl

    request, result, out, err, bell = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
    null = os.open("/dev/null", os.O_RDWR)
    for source, target in ((null, 0), (out, 1), (err, 2), (request, REQUEST_FD), (result, RESULT_FD),
                           (bell, BELL_FD)):
        os.dup2(source, target)
    os.closerange(BELL_FD + 1, 1 << 20)
    try:
        _results.budget = fcntl.fcntl(RESULT_FD, fcntl.F_GETPIPE_SZ) // 2
    except OSError:
        pass
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr


def _confine(spec: dict, layers: dict[str, str], mounted: bool, server_pid: int) -> None:
    """The per-run layers, in order; each degrades on its own."""
    disabled = set(spec["disable"])
    as_root = os.geteuid() == 0
    uid, gid = (spec["uid"], spec["gid"]) if as_root else (os.getuid(), os.getgid())
    if mounted:
        try:
            _attempt(layers, disabled, "filesystem_view", namespaces.finish_view, spec["root"],
                     spec["module_dir"], spec["scratch"], (uid, gid), limits.FILE_SIZE_MB)
        except namespaces.SnapshotError as exc:
            spec["snapshot_error"] = str(exc)
    if layers["namespaces"] == "active" and not as_root:
        _attempt(layers, disabled, "capabilities_dropped", limits.drop_capabilities)
    nproc = limits.THREADS_PER_RUN if as_root else None
    _attempt(layers, disabled, "rlimits", limits.set_rlimits, spec["limits"]["memory_mb"],
             spec["limits"]["cpu_s"], nproc)
    # no_new_privs: required by Landlock for a non-root caller, and by seccomp.
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    _attempt(layers, disabled, "landlock", landlock.restrict,
             [*spec["read"], spec["module_dir"]], [spec["scratch"]], list(spec["devices"]))
    if as_root:
        _attempt(layers, disabled, "uid_drop", limits.drop_uid, uid, gid)
    limits.die_with_parent(server_pid)  # a uid change clears it
    if _attempt(layers, disabled, "seccomp", seccomp.install, spec["seccomp_program"]) and spec["seccomp_log"]:
        layers["seccomp"] = f"log only ({seccomp.LOG_ENV}=1): unlisted calls are allowed and logged"
    os.environ.update(HOME=spec["scratch"], TMPDIR=spec["scratch"])
    os.chdir(spec["scratch"])


class _ResultStream:
    """The result pipe and its bell (see the module's docstring)."""

    def __init__(self) -> None:
        self.budget = 32 * 1024   # bytes the grader may leave unread: half the pipe
        self.unread = 0           # written since the grader last read the pipe
        self.streaming = False

    def send(self, data: bytes) -> None:
        if not self.streaming and self.unread + len(data) > self.budget:
            self.ring(STREAMING)  # before a write that could block on a pipe nobody reads
        wire.write_all(RESULT_FD, data)
        self.unread += len(data)

    def ring(self, word: bytes) -> None:
        try:
            os.write(BELL_FD, word)
        except OSError:  # closed by the student's code: the grader then reads every frame as it comes
            pass
        self.streaming = word == STREAMING
        if word == WAITING:
            self.unread = 0  # the grader reads it all before it sends what this child waits for


_results = _ResultStream()


def _send(header: dict, value: object = wire.NO_VALUE, payload: bytes | None = None) -> None:
    _results.send(wire.frame(header, value, payload=payload))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _serve(spec: dict) -> None:
    """Import the module, then run each call as the grader sends it.

    The module is imported before any input exists in this process: the
    grader writes the first batch of calls only after ``imported``, and each
    next batch only after the previous one's last result, so code that runs
    at import time (an error text, a module-level global, a thread reading
    fd 3) finds nothing of the hidden inputs. A batch is one check's calls:
    they run one by one, each answered on its own (a call that raises fails
    only itself), and no call sees a later check's inputs."""
    import torch
    from coursekit.loader import load_module

    library = _probe_library(spec.get("probes"))
    torch.set_num_threads(spec["limits"]["threads"])
    try:
        module = load_module(spec["module_dir"], spec["module_name"])
    except BaseException as exc:  # ExerciseImportError, or SystemExit at import time
        message = str(exc) if type(exc).__name__ == "ExerciseImportError" else \
            f"importing {spec['module_name']}.py raised {wire.one_line(exc)}"
        _send({"kind": "import_error", "error": message[:2000]})
        return
    _send({"kind": "imported"})
    i = 0
    while (batch := _next_batch(i)) is not None:
        for probe, kwargs in batch:
            _send(*_call(i, _resolve(probe, library), module, kwargs))
            i += 1
        del batch, probe, kwargs  # nothing of this batch's inputs outlives it here


def _next_batch(i: int) -> list[tuple[str, dict]] | None:
    """The next batch's calls, from call ``i`` on, as (probe, kwargs); None
    when the grader has no more."""
    _results.ring(WAITING)
    got = wire.read_frame(REQUEST_FD)
    if got is None:
        raise wire.ProtocolError("the request stream ended without an 'end' frame")
    header, payload = got
    if header["kind"] == "end":
        return None
    if header["kind"] != "calls" or header.get("i") != i:
        raise wire.ProtocolError(f"expected the calls from {i}, got {header['kind']!r}")
    value = wire.loads(payload)
    if type(value) is not list or not value or len(value) != header.get("n") or not all(
            type(c) is list and len(c) == 2 and type(c[0]) is str and type(c[1]) is dict for c in value):
        raise wire.ProtocolError("a calls frame must hold n [probe, kwargs] pairs")
    return [(probe, kwargs) for probe, kwargs in value]


def _probe_library(names: object) -> dict[str, dict[str, object]]:
    """What each probe module the run names holds, copied before the
    student's module is imported (the fork-server imported them): code that
    rebinds a probe module's names at import time (a fake recorder in place
    of ``dispatch.recorded_call``) does not change what the calls run."""
    library = {}
    for name in names if isinstance(names, list) else []:
        module = sys.modules.get(name) if isinstance(name, str) and name.startswith(PROBE_PACKAGE) else None
        if module is not None:
            library[name] = dict(vars(module))
    return library


def _resolve(probe: str, library: dict[str, dict[str, object]]):
    """The probe function, or the exception that finding it raised."""
    module_name, _, name = probe.partition(":")
    if not module_name.startswith(PROBE_PACKAGE):
        return ValueError(f"not a probe: {probe}")
    if module_name in library:
        found = library[module_name].get(name)
        return found if found is not None else AttributeError(f"module '{module_name}' has no attribute '{name}'")
    try:  # a module the server could not import: the same error, here
        return getattr(importlib.import_module(module_name), name)
    except Exception as exc:
        return exc


def _call(i: int, fn, module, kwargs: dict) -> tuple[dict, object, bytes | None]:
    """Run one call; the frame to send for it."""
    try:
        if isinstance(fn, BaseException):
            raise fn
        value = wire.sanitize(fn(module, **kwargs))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt too: it is the call's failure
        return _error(i, exc), wire.NO_VALUE, None
    try:
        payload = wire.dumps(value)  # refuses what is not plain data, as the grader's decoding would
        if len(payload) > wire.MAX_FRAME:
            raise wire.ProtocolError(f"result is too large ({len(payload) >> 20} MiB)")
    except BaseException as exc:
        header = _error(i, exc)
        if not header["memory"]:
            header["error_type"] = "ProtocolError"
        return header, wire.NO_VALUE, None
    return {"kind": "result", "i": i}, wire.NO_VALUE, payload


def _error(i: int, exc: BaseException) -> dict:
    text = wire.one_line(exc)
    memory = isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "DefaultCPUAllocator" in text))
    return {"kind": "error", "i": i, "error_type": type(exc).__name__, "error": text, "memory": memory}
