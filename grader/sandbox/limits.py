"""Resource limits and privilege drops for the child.

rlimits are per process and inherited by its threads; RLIMIT_CPU counts
every thread's time. RLIMIT_NPROC counts all tasks of the *real uid*, so it
is only meaningful when the child runs under a uid of its own (root dropping
to a dedicated uid); for an ordinary user it would count the instructor's
desktop session too, and is left alone.
"""
from __future__ import annotations

import ctypes
import math
import os
import resource
import signal

from grader.sandbox import syscalls

FILE_SIZE_MB = 64     # largest file the child may write (its scratch is a tmpfs of that size)
OPEN_FILES = 256      # import torch needs ~30; a student needs a few
THREADS_PER_RUN = 256  # RLIMIT_NPROC under a dedicated uid: threads are tasks too


def set_rlimits(memory_mb: int, cpu_s: float, nproc: int | None) -> str:
    """Apply the child's rlimits; returns a description."""
    cpu = max(1, math.ceil(cpu_s))

    def cap(which: int, value: int, hard: int | None = None) -> None:
        hard = value if hard is None else hard
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:  # a limit can only be lowered
            value, hard = min(value, current_hard), min(hard, current_hard)
        resource.setrlimit(which, (value, hard))

    cap(resource.RLIMIT_AS, memory_mb << 20)
    # SIGXCPU at the soft limit; SIGKILL one second later if it is ignored.
    cap(resource.RLIMIT_CPU, cpu, cpu + 1)
    cap(resource.RLIMIT_FSIZE, FILE_SIZE_MB << 20)
    cap(resource.RLIMIT_NOFILE, OPEN_FILES)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_MEMLOCK, 0)
    done = f"AS {memory_mb} MiB, CPU {cpu} s, FSIZE {FILE_SIZE_MB} MiB, NOFILE {OPEN_FILES}, CORE 0"
    if nproc is not None:
        cap(resource.RLIMIT_NPROC, nproc)
        done += f", NPROC {nproc}"
    return done


def drop_uid(uid: int, gid: int) -> str:
    """Root only: become ``uid``/``gid`` with no supplementary groups (this
    also clears every capability)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    try:
        os.setuid(0)
    except PermissionError:
        return f"uid {uid}, gid {gid}"
    raise OSError("setuid(0) still works after dropping privileges")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Clear every capability of the calling process. Needed after
    unshare(CLONE_NEWUSER), which grants a full set inside the new user
    namespace (enough to mount or unshare again)."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    syscalls.syscall("capset", ctypes.byref(header), ctypes.byref(data))


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the fork-server dies. Set after any uid
    change, which clears it."""
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(1)
