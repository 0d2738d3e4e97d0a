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

Every frame goes through one sender (grader/sandbox/channel.py), which
numbers it and checks that its pipe is still the grader's; anything else on
the pipes voids the run as ``tampered`` (grader/sandbox/runstate.py).

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
from collections.abc import Callable

from grader.sandbox import landlock, limits, namespaces, seccomp, syscalls, wire
from grader.sandbox.channel import BELL_FD, REQUEST_FD, RESULT_FD, STREAMING, WAITING, Channel, Tampered
from grader.sandbox.requests import PROBE_PACKAGE

TAMPER_EXIT = wire.TAMPER_EXIT
# Room kept for the frames that follow a large result (errors, "done"): the
# child refuses a result that would take the run past wire.MAX_TOTAL, so the
# grader can take any stream over it for one the child's own code did not write.
_RESERVE = 4 * 1024 * 1024


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
    send = _channel.send  # bound here, before the student's module exists (see channel.py)
    try:
        _arrange_fds(fds)
        _channel.seal()
        _confine(spec, layers, mounted, server_pid)
        send({"kind": "layers", "layers": layers})
        if "snapshot_error" in spec:
            send({"kind": "import_error", "error": spec["snapshot_error"]})
        else:
            _serve(spec, send)
        _flush()  # output before "done": the grader does not wait for more after it
        send({"kind": "done"})
    except Tampered as exc:  # someone else used the request pipe or the bell
        try:
            send({"kind": "tampered", "error": str(exc)})
        except BaseException:
            pass
    except BaseException as exc:  # our own failure (or a student's BaseException escaping)
        try:
            send({"kind": "fatal", "error": wire.one_line(exc)})
            os.write(2, traceback.format_exc().encode(errors="replace")[-4000:])
        except BaseException:
            pass
    finally:
        _flush()
        _channel.ring(WAITING)  # the grader reads the last frames now, not when the exit closes the pipe
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
        _channel.state["budget"] = fcntl.fcntl(RESULT_FD, fcntl.F_GETPIPE_SZ) // 2
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


_channel = Channel()  # the run's one channel (a child serves one run)
_send = _channel.send  # its sender under its old name: a frame forged through it is a frame out of turn


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _serve(spec: dict, send: Callable) -> None:
    """Import the module, then run each call as the grader sends it.

    The module is imported before any input exists in this process: the
    grader writes the first batch of calls only after ``imported``, and each
    next batch only after the previous one's last result, so code that runs
    at import time (an error text, a module-level global, a thread reading
    fd 3) finds nothing of the hidden inputs. A batch is one check's calls:
    they run one by one, each answered on its own (a call that raises fails
    only itself), and no call sees a later check's inputs.

    Before each result is sent, the functions that carry it (the channel's,
    the call's, the batch reader's) must be as they were before the import
    (their code, defaults and closures, by identity; compared here, in a
    frame whose running code nobody can change): code that rewrote one to
    swallow or rewrite a frame ends the run as ``tampered``."""
    import torch
    from coursekit.loader import load_module

    library = _probe_library(spec.get("probes"))
    torch.set_num_threads(spec["limits"]["threads"])
    # Bound before the import; the same expression twice (a helper's code could be replaced).
    carriers, exit_, tuple_ = (*_channel.functions(), _call, _next_batch, _resolve), os._exit, tuple
    sealed = tuple_((f.__code__, f.__defaults__, *(f.__kwdefaults__ or {}).values(),
                     *(c.cell_contents for c in f.__closure__ or ()))
                    for f in carriers)
    call, next_batch, resolve = _call, _next_batch, _resolve
    _SUBMISSION[:] = [os.path.join(os.path.abspath(spec["module_dir"]), "")]
    try:
        module = load_module(spec["module_dir"], spec["module_name"])
    except BaseException as exc:  # ExerciseImportError, or SystemExit at import time
        message = str(exc) if type(exc).__name__ == "ExerciseImportError" else \
            f"importing {spec['module_name']}.py raised {wire.one_line(exc)}"
        send({"kind": "import_error", "error": message[:2000]})
        return
    send({"kind": "imported"})
    i = 0
    while (batch := next_batch(i)) is not None:
        for probe, kwargs in batch:
            header, payload = call(i, resolve(probe, library), module, kwargs)
            if tuple_((f.__code__, f.__defaults__, *(f.__kwdefaults__ or {}).values(),
                     *(c.cell_contents for c in f.__closure__ or ()))
                      for f in carriers) != sealed:
                exit_(TAMPER_EXIT)  # the sender itself may be the one changed: nothing is sent
            send(header, payload)
            i += 1
        del batch, probe, kwargs  # nothing of this batch's inputs outlives it here


def _next_batch(i: int, *, _channel=_channel, _read=wire.read_frame, _loads=wire.loads) -> list[tuple[str, dict]] | None:
    """The next batch's calls, from call ``i`` on, as (probe, kwargs); None
    when the grader has no more. The grader writes only whole, valid
    frames: anything else means someone else read from or wrote to the
    request pipe (:class:`Tampered`)."""
    _channel.check(BELL_FD)
    _channel.ring(WAITING)
    _channel.check(REQUEST_FD)
    try:
        got = _read(REQUEST_FD)
        if got is None:
            raise wire.ProtocolError("the request stream ended without an 'end' frame")
        header, payload = got
        if header["kind"] == "end":
            return None
        if header["kind"] != "calls" or header.get("i") != i:
            raise wire.ProtocolError(f"expected the calls from {i}, got {header['kind']!r}")
        value = _loads(payload)
        if type(value) is not list or not value or len(value) != header.get("n") or not all(
                type(c) is list and len(c) == 2 and type(c[0]) is str and type(c[1]) is dict for c in value):
            raise wire.ProtocolError("a calls frame must hold n [probe, kwargs] pairs")
    except (wire.ProtocolError, OSError) as exc:
        raise Tampered(f"the request stream was disturbed: {wire.one_line(exc, 120)}") from None
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


def _call(i: int, fn, module, kwargs: dict, *, _state=_channel.state) -> tuple[dict, bytes]:
    """Run one call; the frame to send for it (header, payload)."""
    try:
        if isinstance(fn, BaseException):
            raise fn
        value = wire.sanitize(fn(module, **kwargs))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt too: it is the call's failure
        return _error(i, exc), b""
    try:
        payload = wire.dumps(value)  # refuses what is not plain data, as the grader's decoding would
        if len(payload) > wire.MAX_FRAME:
            raise wire.ProtocolError(f"result is too large ({len(payload) >> 20} MiB)")
        if _state["total"] + len(payload) > wire.MAX_TOTAL - _RESERVE:
            raise wire.ProtocolError(f"the run's results would pass {wire.MAX_TOTAL >> 20} MiB")
    except BaseException as exc:
        header = _error(i, exc)
        if not header["memory"]:
            header["error_type"] = "ProtocolError"
        return header, b""
    return {"kind": "result", "i": i}, payload


# The submission's folder as this child sees it (set before the import):
# where an exception was raised is told by the deepest frame under it.
_SUBMISSION: list[str] = []


def _raised_where(exc: BaseException) -> list | None:
    """[file relative to the submission's folder, line] of the deepest frame
    of the traceback in the submission's own files (never a probe's or the
    grader's), or None. A claim like any other: it only shapes feedback text."""
    try:
        found = None
        for frame, line in traceback.walk_tb(exc.__traceback__):
            name = frame.f_code.co_filename
            if _SUBMISSION and type(name) is str and name.startswith(_SUBMISSION[0]):
                found = [name[len(_SUBMISSION[0]):][:120], int(line)]
        return found
    except Exception:  # a frame or a name of any form: no place rather than no answer
        return None


def _error(i: int, exc: BaseException) -> dict:
    text = wire.one_line(exc)
    memory = isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "DefaultCPUAllocator" in text))
    return {"kind": "error", "i": i, "error_type": type(exc).__name__[:100], "error": text, "memory": memory,
            "where": _raised_where(exc)}
