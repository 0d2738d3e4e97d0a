"""A seccomp filter, assembled by hand (classic BPF) and loaded with prctl.

No library is needed: libseccomp is not always installed on laptops and the
filter is small. It is the last layer applied, because it also forbids the
calls the earlier layers need (mount, unshare, ...).

Default: allow. Denied (EPERM unless noted): new processes and programs
(fork, vfork, clone without CLONE_THREAD, execve; clone3 → ENOSYS so that
glibc falls back to clone, whose flags the filter can read), every socket
(socket → EAFNOSUPPORT; this covers UDP and pathname unix sockets, which
Landlock does not), tracing and other processes' memory, namespaces and
mounts, kernel keyrings, BPF, io_uring, userfaultfd, perf, module loading,
and signals or scheduling changes aimed at any process but the child itself.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct

from grader.sandbox import syscalls

RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ARCH_OFFSET, _NR_OFFSET = 4, 0

DENY_EPERM = (
    "fork", "vfork", "execve", "execveat",
    "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd", "pidfd_send_signal",
    "tkill", "ioprio_set", "migrate_pages", "move_pages",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "acct", "quotactl", "quotactl_fd", "syslog", "sethostname", "setdomainname", "lookup_dcookie", "iopl", "ioperm",
    "uselib", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
)


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    if not (0 <= jt < 256 and 0 <= jf < 256):
        raise ValueError("BPF jump out of range")
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg_low(index: int) -> int:
    # struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]. The kernel
    # reads pid/int arguments as 32 bits, so only the low word matters.
    return 16 + 8 * index


def _only_if(conditions: list[tuple[int, list[int]]], deny: int) -> list[bytes]:
    """Allow when every (argument, allowed values) condition holds, else ``deny``."""
    block: list[bytes] = []
    for arg, values in conditions:
        block.append(_stmt(_LD_ABS, _arg_low(arg)))
        n = len(values)
        # A match skips the remaining compares and this condition's deny.
        block += [_jump(_JEQ, v, n - i, 0) for i, v in enumerate(values)]
        block.append(_stmt(_RET, deny))
    block.append(_stmt(_RET, RET_ALLOW))
    return block


def build_filter(pid: int, nr: dict[str, int], arch: int) -> bytes:
    """The filter program for a child whose pid is ``pid``."""
    eperm = RET_ERRNO | errno.EPERM
    me = [pid, (-pid) & 0xFFFFFFFF]
    prog = [_stmt(_LD_ABS, _ARCH_OFFSET), _jump(_JEQ, arch, 1, 0), _stmt(_RET, RET_KILL_PROCESS),
            _stmt(_LD_ABS, _NR_OFFSET)]
    if arch == syscalls.AUDIT_ARCH["x86_64"]:
        # x32 calls (nr | 0x40000000) alias the 64-bit ones: refuse them all.
        prog += [_jump(_JGE, 0x40000000, 0, 1), _stmt(_RET, RET_ERRNO | errno.ENOSYS)]

    def simple(name: str, action: int) -> None:
        if name in nr:
            prog.extend([_jump(_JEQ, nr[name], 0, 1), _stmt(_RET, action)])

    def guarded(name: str, block: list[bytes]) -> None:
        if name in nr:
            prog.append(_jump(_JEQ, nr[name], 0, len(block)))
            prog.extend(block)  # every block returns, so A still holds nr after a skip

    for name in DENY_EPERM:
        simple(name, eperm)
    simple("socket", RET_ERRNO | errno.EAFNOSUPPORT)
    simple("clone3", RET_ERRNO | errno.ENOSYS)
    guarded("clone", [_stmt(_LD_ABS, _arg_low(0)), _jump(_JSET, syscalls.CLONE_THREAD, 1, 0),
                      _stmt(_RET, eperm), _stmt(_RET, RET_ALLOW)])
    guarded("kill", _only_if([(0, [0, *me])], eperm))
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        guarded(name, _only_if([(0, [pid])], eperm))
    for name in ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"):
        guarded(name, _only_if([(0, [0, pid])], eperm))
    guarded("setpriority", _only_if([(0, [0]), (1, [0, pid])], eperm))  # PRIO_PROCESS, self only
    prog.append(_stmt(_RET, RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str:
    """Load the filter into the calling process (and its future threads)."""
    arch = syscalls.AUDIT_ARCH.get(syscalls.MACHINE)
    if arch is None or not syscalls.supported():
        raise OSError(errno.ENOSYS, f"no seccomp table for {syscalls.MACHINE}")
    program = build_filter(os.getpid(), syscalls.NR, arch)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    syscalls._check(syscalls._libc.prctl(syscalls.PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0), "seccomp")
    return f"{len(program) // 8} BPF instructions, {syscalls.MACHINE}"
