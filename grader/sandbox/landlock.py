"""Landlock (Linux ≥ 5.13) through ctypes: an allow-list of paths the child
may read, one scratch folder it may write, no TCP, and (ABI ≥ 6) no signals
or abstract unix sockets towards processes outside the sandbox.

Landlock needs no privilege, so it works the same as root and as an
ordinary user; it also stops root-in-the-child (it is checked on top of
file permissions). Each feature is enabled only when the kernel's ABI has
it, and :func:`restrict` says which ones were.
"""
from __future__ import annotations

import ctypes
import os
import stat

from grader.sandbox import syscalls

# Filesystem rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_FS = (1 << 13) - 1          # EXECUTE ... MAKE_SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI, or 0 when Landlock is unavailable."""
    try:
        return syscalls.syscall("landlock_create_ruleset", None, ctypes.c_size_t(0),
                                ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def handled_fs(abi: int) -> int:
    """Every filesystem right the ABI knows: all of them are denied unless a rule grants them."""
    rights = _ABI1_FS
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict(read: list[str], write: list[str], devices: list[str], abi: int | None = None) -> str:
    """Confine the calling (single-threaded) process for good.

    ``read``: files and folders readable (and listable) below; ``write``:
    folders with every right; ``devices``: files readable and writable
    (``/dev/null``). Paths that do not exist are skipped. The caller must
    have set no_new_privs (or hold CAP_SYS_ADMIN). Returns a description
    of what is enforced.
    """
    abi = abi_version() if abi is None else abi
    if abi <= 0:
        raise OSError(38, "Landlock is not supported by this kernel")
    fs = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs,
                        handled_access_net=(NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    # Older kernels reject fields they do not know: pass only the prefix this ABI defines.
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = syscalls.syscall("landlock_create_ruleset", ctypes.byref(attr), ctypes.c_size_t(size),
                               ctypes.c_uint32(0))
    file_only = EXECUTE | WRITE_FILE | READ_FILE | (TRUNCATE | IOCTL_DEV) & fs
    try:
        for paths, rights in ((read, EXECUTE | READ_FILE | READ_DIR), (write, fs),
                              (devices, READ_FILE | WRITE_FILE | (TRUNCATE | IOCTL_DEV) & fs)):
            for path in paths:
                _add_rule(ruleset, path, rights, file_only)
        syscalls.syscall("landlock_restrict_self", ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    parts = [f"ABI {abi}: filesystem allow-list"]
    parts.append("TCP bind/connect denied" if abi >= 4 else "no TCP control (ABI < 4)")
    parts.append("signals and abstract sockets scoped" if abi >= 6 else "no signal scoping (ABI < 6)")
    return ", ".join(parts)


def _add_rule(ruleset: int, path: str, rights: int, file_only: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine does not have
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= file_only  # directory-only rights on a file are EINVAL
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        syscalls.syscall("landlock_add_rule", ruleset, ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                         ctypes.c_uint32(0))
    finally:
        os.close(fd)
