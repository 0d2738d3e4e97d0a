"""One sandboxed run, in a child forked by the fork-server.

The child confines itself first (in this order: session, namespaces,
filesystem view, rlimits, Landlock, uid, seccomp), reports which layers
took, and only then reads its request, imports the module and runs the
probe calls, streaming one frame per call. It never returns: it ends with
``os._exit``.

fds on entry to the student's code: 0 = /dev/null, 1 and 2 = capped pipes
read by the grader, 3 = the request, 4 = the result frames. Nothing else.
"""
from __future__ import annotations

import importlib
import os
import sys
import traceback

from grader.sandbox import landlock, limits, namespaces, seccomp, syscalls, wire

REQUEST_FD, RESULT_FD = 3, 4


def run(spec: dict, fds: list[int], server_pid: int) -> None:
    """Entry point in the forked child; never returns."""
    try:
        os.setsid()  # its own session and process group: the grader kills the group
        _arrange_fds(fds)
        layers = _confine(spec, server_pid)
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
        os._exit(0)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _arrange_fds(fds: list[int]) -> None:
    """fds = [request, result, stdout, stderr] from the grader; put them in
    place and close everything else (fds inherited through fork stay open
    and readable otherwise, O_CLOEXEC or not)."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
    request, result, out, err = high
    null = os.open("/dev/null", os.O_RDWR)
    for source, target in ((null, 0), (out, 1), (err, 2), (request, REQUEST_FD), (result, RESULT_FD)):
        os.dup2(source, target)  # dup2 targets are inheritable; nothing is exec'd anyway
    os.closerange(RESULT_FD + 1, 1 << 20)
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr


def _confine(spec: dict, server_pid: int) -> dict[str, str]:
    """Apply every layer that works here; returns name -> "active" or
    "missing: reason". A failing layer degrades, it never aborts the run."""
    layers: dict[str, str] = {"fork_server": "active", "session": "active"}
    disabled = set(spec.get("disable", ()))
    as_root = os.geteuid() == 0
    uid, gid = (spec["uid"], spec["gid"]) if as_root else (os.getuid(), os.getgid())

    def attempt(name: str, fn, *args):
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

    entered = attempt("namespaces", namespaces.enter, as_root)
    if entered is None:
        layers["filesystem_view"] = "missing: no mount namespace"
    else:
        view = namespaces.View(
            root=spec["run_dir"], read=tuple(spec["read"]), devices=tuple(spec["devices"]),
            module_dir=spec["module_dir"], scratch=spec["scratch"], owner=(uid, gid),
            scratch_mb=limits.FILE_SIZE_MB)
        try:
            attempt("filesystem_view", namespaces.build_view, view)
        except namespaces.SnapshotError as exc:
            spec["snapshot_error"] = str(exc)
            layers["filesystem_view"] = "active"
        if not as_root:
            attempt("capabilities_dropped", limits.drop_capabilities)
    nproc = limits.THREADS_PER_RUN if as_root else None
    attempt("rlimits", limits.set_rlimits, spec["limits"]["memory_mb"], spec["limits"]["cpu_s"], nproc)
    # no_new_privs: required by Landlock for a non-root caller, and by seccomp.
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    attempt("landlock", landlock.restrict,
            [*spec["read"], spec["module_dir"]], [spec["scratch"]], list(spec["devices"]))
    if as_root:
        attempt("uid_drop", limits.drop_uid, uid, gid)
    limits.die_with_parent(server_pid)
    attempt("seccomp", seccomp.install)
    os.environ.update(HOME=spec["scratch"], TMPDIR=spec["scratch"])
    os.chdir(spec["scratch"])
    return layers


def _send(header: dict, value: object = wire.NO_VALUE, payload: bytes | None = None) -> None:
    wire.write_all(RESULT_FD, wire.frame(header, value, payload=payload))


def _serve(spec: dict) -> None:
    """Read the request, import the module, run each call."""
    import torch
    from coursekit.loader import load_module

    got = wire.read_frame(REQUEST_FD)
    if got is None:
        raise wire.ProtocolError("no request")
    calls = wire.loads(got[1])
    torch.set_num_threads(spec["limits"]["threads"])
    probes = [_resolve(probe) for probe, _ in calls]
    try:
        module = load_module(spec["module_dir"], spec["module_name"])
    except BaseException as exc:  # ExerciseImportError, or SystemExit at import time
        message = str(exc) if type(exc).__name__ == "ExerciseImportError" else \
            f"importing {spec['module_name']} raised {wire.one_line(exc)}"
        _send({"kind": "import_error", "error": message[:2000]})
        return
    for i, ((probe, kwargs), fn) in enumerate(zip(calls, probes)):
        _send({"kind": "begin", "i": i})
        _send(*_call(i, fn, module, kwargs))


def _resolve(probe: str):
    """The probe function, or the exception that finding it raised."""
    module_name, _, name = probe.partition(":")
    if not module_name.startswith("coursekit.probes."):
        return ValueError(f"not a probe: {probe}")
    try:
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
        wire.validate(value)
        payload = wire.dumps(value)
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
