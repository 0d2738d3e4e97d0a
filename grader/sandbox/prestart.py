"""Start the fork-server before the grader has imported anything heavy.

The server imports torch and warms up (~2 s); so does the grader. Started
one after the other they cost twice that; started first thing, on two cores
the two imports run side by side. This module imports nothing of torch (nor
does ``grader.sandbox``'s ``__init__``, which loads lazily), so
``grader grade`` can call :func:`start_early` before its own imports.

A server started early and never taken (the command failed on a bad
option, or graded with Dask) is killed when the grader exits.
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

# The repository root, where ``python -m grader.sandbox.server`` runs (as in policy.REPO_ROOT).
_REPO_ROOT = Path(__file__).resolve().parents[2]
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "VIRTUAL_ENV")

_early: tuple[subprocess.Popen, socket.socket] | None = None
_early_lock = threading.Lock()


def spawn() -> tuple[subprocess.Popen, socket.socket]:
    """Exec a fresh fork-server with a scrubbed environment; the process and
    our end of its control socket. It says ``ready`` once warm."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # libgomp's workers spin while they wait; with many short children on
    # few cores the spinning starves the others: on 2 busy cores the first
    # 2-thread op in a child took 23-29 ms spinning, 0.9 ms passive.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-s", "-m", "grader.sandbox.server", "--fd", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], cwd=_REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, start_new_session=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours


def start_early() -> None:
    """Spawn a fork-server now, for the next :class:`Sandbox` to take; a
    no-op off Linux or when one is already waiting."""
    global _early
    # GRADER_SANDBOX_PRESTART=0: start it when first needed (bench/startup.py compares the two).
    if not sys.platform.startswith("linux") or os.environ.get("GRADER_SANDBOX_PRESTART") == "0":
        return
    with _early_lock:
        if _early is None:
            try:
                _early = spawn()
            except OSError:  # the sandbox reports its own start failure later, with context
                return
            atexit.register(_discard)


def take() -> tuple[subprocess.Popen, socket.socket] | None:
    """The server started early, if one is waiting and still alive (once)."""
    global _early
    with _early_lock:
        early, _early = _early, None
    if early is not None and early[0].poll() is not None:
        early[1].close()
        early[0].wait()
        return None
    return early


def wants_early_server(argv: Sequence[str]) -> bool:
    """Whether a command line is one that grades here in the sandbox
    (``grade`` or ``watch``, not asking for help, not handing off to Dask)."""
    args = list(argv[1:])
    if not args or args[0] not in ("grade", "watch"):
        return False
    if "--help" in args or "-h" in args:
        return False
    return not any(a == "dask" or a == "--executor=dask" for a in args)


def start_for(argv: Sequence[str]) -> None:
    """:func:`start_early` when ``argv`` is a command that will grade."""
    if wants_early_server(argv):
        start_early()


def _discard() -> None:
    early = take()
    if early is not None:
        proc, ours = early
        ours.close()  # the server exits when the socket closes; it may still be importing
        proc.kill()
        proc.wait()
