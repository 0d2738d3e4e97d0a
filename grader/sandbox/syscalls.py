"""Raw Linux system calls the sandbox needs and Python does not wrap.

Python 3.11 has no ``os.unshare``, ``mount``, ``pivot_root``, Landlock or
seccomp, so the isolation layers call them through ``ctypes``. The numbers
are in ``syscall_numbers.py``; the x86_64 table is the one exercised by
the tests, aarch64's is checked against libseccomp but not run.
"""
from __future__ import annotations

import ctypes
import os
import platform

from grader.sandbox.syscall_numbers import AARCH64, X86_64

# AUDIT_ARCH_* values: the seccomp filter refuses any other calling convention
# (e.g. 32-bit int 0x80 on x86_64, whose numbers mean different calls).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
TABLES = {"x86_64": X86_64, "aarch64": AARCH64}

MACHINE = platform.machine()
NR: dict[str, int] = TABLES.get(MACHINE, {})

_libc = ctypes.CDLL(None, use_errno=True)
LINUX = platform.system() == "Linux" and hasattr(_libc, "unshare")
if LINUX:
    _libc.syscall.restype = ctypes.c_long
    _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
else:  # importable elsewhere (macOS), so that the grader loads; Sandbox refuses to start
    NR = {}


def supported() -> bool:
    """Whether this is Linux on a CPU architecture with a syscall table here."""
    return LINUX and bool(NR)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def syscall(name: str, *args: object) -> int:
    """Call ``name`` by number; raise OSError on failure."""
    if name not in NR:
        raise OSError(38, f"{name}: not available on {MACHINE}")
    return _check(_libc.syscall(NR[name], *args), name)


def unshare(flags: int) -> None:
    """unshare(2)."""
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2)."""
    enc = lambda s: None if s is None else s.encode()  # noqa: E731 - tiny local helper
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount2(target: str, flags: int) -> None:
    """umount2(2)."""
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2) with integer arguments."""
    return _check(_libc.prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


# unshare(2) flags
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
# mount(2) flags
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
# prctl(2) options
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
