"""A seccomp filter that denies by default: an allow list, assembled by hand
(classic BPF) and loaded with prctl. It is the last layer applied, because
it also forbids the calls the earlier layers need (mount, unshare, ...).

Why hand-assembled rather than libseccomp (``pyseccomp``): for an allow
list the library's main gift, resolving names to numbers on any
architecture, buys nothing (a call this module does not name is denied
whatever its number), while the dependency would make the layer's strength
depend on what a laptop has installed. The program is small (about 300
instructions, built in well under a millisecond in each child) and its
numbers are checked against libseccomp's tables by the tests wherever the
library is installed. Architectures without a table here (not x86_64 or
aarch64) run without the layer, and ``grader doctor`` and the layers
report say so.

Policy:

* **Allowed**: :data:`ALLOWED`, what the interpreter, torch and the probes
  were measured to need (file I/O on what Landlock and the view allow,
  memory, threads, futexes, signals to itself, time, polling, pairs of
  connected unix sockets) plus their close relatives.
* **Allowed with conditions on the arguments**: ``clone`` only for threads;
  ``kill``/``tgkill``/``rt_*sigqueueinfo`` only to the child itself and
  never SIGKILL (so that a SIGKILL that ends a child always came from
  outside it: see ``RunResult.ended_by``); ``prlimit64`` only to read;
  scheduling and priority changes only for itself; ``fcntl`` without
  ``F_SETSIG`` (which could make the kernel SIGKILL it on I/O) and without
  file locks and leases (:data:`F_LOCKS`).
* **Denied with EPERM** (:data:`DENIED`, named so that programs get the
  error they expect, e.g. ``PermissionError`` from ``os.fork``): new
  processes and programs, tracing, namespaces and mounts, keyrings, BPF,
  io_uring, userfaultfd, perf, modules, clock and host changes,
  ``setrlimit``, ``timer_create`` (a timer can deliver SIGKILL), seccomp and
  Landlock themselves; ``flock``: file locks on files every child can read
  (/etc/ld.so.cache) were a channel between two children running at once
  (issue 36), and nothing graded needs one. ``socket`` fails with EAFNOSUPPORT (no network, no
  pathname unix sockets, which Landlock does not cover); ``clone3`` with
  ENOSYS so that glibc falls back to ``clone``, whose flags the filter can
  read.
* **Everything else**: ENOSYS, "this kernel has no such call", which is
  what programs already handle for calls newer than their kernel. A call
  added to a future kernel is therefore denied until it is listed here.

``GRADER_SANDBOX_SECCOMP_LOG=1`` (for measuring what a new course needs)
makes everything else *allowed and logged* by the kernel instead
(``dmesg``: ``audit: type=1326 ... syscall=N``); the layer then reports
itself as not active.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import signal
import struct

from grader.sandbox import syscalls

RET_KILL_PROCESS, RET_ERRNO, RET_LOG, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFC0000, 0x7FFF0000
_LD_ABS, _JA, _JEQ, _JGE, _JSET, _RET = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
_ARCH_OFFSET, _NR_OFFSET = 4, 0
F_SETSIG = 10
# fcntl's lock and lease commands: F_GETLK, F_SETLK, F_SETLKW, the open file
# description locks F_OFD_GETLK/SETLK/SETLKW, F_SETLEASE, F_GETLEASE. Denied
# with flock: a lock one child takes on a shared file, another sees.
F_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025)
LOG_ENV = "GRADER_SANDBOX_SECCOMP_LOG"

# The filter compares the calls in order: the hottest first, then the
# conditional ones, then the rest of ALLOWED.
HOT = (
    "futex", "read", "write", "mmap", "munmap", "mprotect", "madvise", "brk", "mremap", "close", "openat",
    "newfstatat", "fstat", "statx", "lseek", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
    "preadv2", "pwritev2", "sched_yield", "sched_getaffinity", "getpid", "gettid", "clock_gettime",
    "clock_nanosleep", "nanosleep", "getrandom", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
)
ALLOWED = HOT + (
    # files (what Landlock and the filesystem view leave reachable)
    "open", "creat", "close_range", "stat", "lstat", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "getdents", "getdents64", "readlink", "readlinkat", "getcwd", "chdir", "fchdir", "dup", "dup2", "dup3",
    "pipe", "pipe2", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "truncate", "ftruncate", "fsync",
    "fdatasync", "fallocate", "utimensat", "utime", "utimes", "futimesat", "umask", "fadvise64",
    "sendfile", "copy_file_range", "splice", "tee", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
    "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "ioctl",
    # memory, threads
    "msync", "mincore", "membarrier", "get_mempolicy", "futex_waitv", "set_robust_list", "get_robust_list",
    "set_tid_address", "rseq", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getattr", "getpriority", "exit", "exit_group", "arch_prctl", "prctl",
    # signals (sending one is conditional: see build_filter), time
    "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend", "sigaltstack", "alarm", "setitimer", "getitimer",
    "pause", "restart_syscall", "signalfd", "signalfd4", "clock_getres", "gettimeofday", "time", "times",
    "getrusage",
    # who am I
    "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "getpgrp",
    "getpgid", "getsid", "uname", "sysinfo", "getcpu", "getrlimit",
    # waiting on fds; connected unix socket pairs (asyncio, multiprocessing's pipes): socket() itself is denied
    "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "socketpair", "sendmsg", "recvmsg", "sendto",
    "recvfrom", "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername", "wait4", "waitid",
)

DENIED = (
    "fork", "vfork", "execve", "execveat", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd", "pidfd_send_signal",
    "tkill", "ioprio_set", "migrate_pages", "move_pages",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "acct", "quotactl", "quotactl_fd", "syslog", "sethostname", "setdomainname", "lookup_dcookie", "iopl", "ioperm",
    "uselib", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "setrlimit", "timer_create", "seccomp", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self", "capset", "flock",
)


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    if not (0 <= jt < 256 and 0 <= jf < 256):
        raise ValueError("BPF jump out of range")
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg(index: int, high: bool = False) -> int:
    # struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian
    # on both architectures here). The kernel reads pid, signal and command
    # arguments as 32 bits, so their low word is the whole value.
    return 16 + 8 * index + (4 if high else 0)


def _one_of(arg: int, values: list[int], deny: int) -> list[bytes]:
    """Go on when argument ``arg`` is one of ``values``, else return ``deny``."""
    n = len(values)
    return [_stmt(_LD_ABS, _arg(arg)), *(_jump(_JEQ, v, n - i, 0) for i, v in enumerate(values)), _stmt(_RET, deny)]


def _none_of(arg: int, values: list[int], deny: int) -> list[bytes]:
    """Return ``deny`` when argument ``arg`` is one of ``values``, else go on."""
    n = len(values)
    return [_stmt(_LD_ABS, _arg(arg)), *(_jump(_JEQ, v, n - i, 0) for i, v in enumerate(values)),
            _stmt(_JA, 1), _stmt(_RET, deny)]


def _null(arg: int, deny: int) -> list[bytes]:
    """Go on when pointer argument ``arg`` is NULL (both words), else ``deny``."""
    return [_stmt(_LD_ABS, _arg(arg)), _jump(_JEQ, 0, 0, 2), _stmt(_LD_ABS, _arg(arg, high=True)),
            _jump(_JEQ, 0, 1, 0), _stmt(_RET, deny)]


def build_filter(pid: int, nr: dict[str, int], arch: int, log: bool = False) -> bytes:
    """The filter program for a child whose pid is ``pid``; ``log``: allow
    and log unlisted calls instead of denying them (measuring only)."""
    eperm = RET_ERRNO | errno.EPERM
    me, kill = [pid, (-pid) & 0xFFFFFFFF], int(signal.SIGKILL)
    prog = [_stmt(_LD_ABS, _ARCH_OFFSET), _jump(_JEQ, arch, 1, 0), _stmt(_RET, RET_KILL_PROCESS),
            _stmt(_LD_ABS, _NR_OFFSET)]
    if arch == syscalls.AUDIT_ARCH["x86_64"]:
        # x32 calls (nr | 0x40000000) alias the 64-bit ones: refuse them all.
        prog += [_jump(_JGE, 0x40000000, 0, 1), _stmt(_RET, RET_ERRNO | errno.ENOSYS)]

    def simple(name: str, action: int) -> None:
        if name in nr:
            prog.extend([_jump(_JEQ, nr[name], 0, 1), _stmt(_RET, action)])

    def guarded(name: str, *conditions: list[bytes]) -> None:
        """Allow ``name`` when every condition lets it through."""
        if name in nr:
            block = [ins for condition in conditions for ins in condition] + [_stmt(_RET, RET_ALLOW)]
            prog.append(_jump(_JEQ, nr[name], 0, len(block)))
            prog.extend(block)  # every block returns, so A still holds nr after a skip

    for name in HOT:
        simple(name, RET_ALLOW)
    guarded("clone", [_stmt(_LD_ABS, _arg(0)), _jump(_JSET, syscalls.CLONE_THREAD, 1, 0), _stmt(_RET, eperm)])
    guarded("kill", _one_of(0, [0, *me], eperm), _none_of(1, [kill], eperm))
    guarded("tgkill", _one_of(0, [pid], eperm), _none_of(2, [kill], eperm))
    guarded("rt_sigqueueinfo", _one_of(0, [pid], eperm), _none_of(1, [kill], eperm))
    guarded("rt_tgsigqueueinfo", _one_of(0, [pid], eperm), _none_of(2, [kill], eperm))
    guarded("prlimit64", _one_of(0, [0, pid], eperm), _null(2, eperm))
    for name in ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"):
        guarded(name, _one_of(0, [0, pid], eperm))
    guarded("setpriority", _one_of(0, [0], eperm), _one_of(1, [0, pid], eperm))  # PRIO_PROCESS, self only
    guarded("fcntl", _none_of(1, [F_SETSIG, *F_LOCKS], eperm))
    for name in ALLOWED[len(HOT):]:
        simple(name, RET_ALLOW)
    for name in DENIED:
        simple(name, eperm)
    simple("socket", RET_ERRNO | errno.EAFNOSUPPORT)
    simple("clone3", RET_ERRNO | errno.ENOSYS)
    prog.append(_stmt(_RET, RET_LOG if log else RET_ERRNO | errno.ENOSYS))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def program(log: bool = False) -> bytes | None:
    """The filter program for the calling process, or None where this
    architecture has no table (``install`` then says why)."""
    arch = syscalls.AUDIT_ARCH.get(syscalls.MACHINE)
    if arch is None or not syscalls.supported():
        return None
    return for_pid(_template(arch, log), os.getpid())


# A pid no process has (pids stay below 2**22) and no other constant of the
# program equals: the template is built with it, and each child writes its own.
_PLACEHOLDER = 0x2BADF00D
_K_OFFSET = 4  # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k


@functools.lru_cache(maxsize=4)
def _template(arch: int, log: bool) -> tuple[bytes, tuple[int, ...], tuple[int, ...]]:
    """The program built once (the fork-server builds it before it forks:
    ~0.8 ms each child paid), and where the pid and its negation go."""
    prog = build_filter(_PLACEHOLDER, syscalls.NR, arch, log)
    ks = [struct.unpack_from("=I", prog, i + _K_OFFSET)[0] for i in range(0, len(prog), 8)]
    return (prog, tuple(8 * n + _K_OFFSET for n, k in enumerate(ks) if k == _PLACEHOLDER),
            tuple(8 * n + _K_OFFSET for n, k in enumerate(ks) if k == (-_PLACEHOLDER) & 0xFFFFFFFF))


def for_pid(template: tuple[bytes, tuple[int, ...], tuple[int, ...]], pid: int) -> bytes:
    """The template's program with ``pid`` written in (the same bytes as
    ``build_filter(pid, ...)``: a test holds it to that)."""
    prog, at_pid, at_negated = template
    out = bytearray(prog)
    for offset in at_pid:
        struct.pack_into("=I", out, offset, pid & 0xFFFFFFFF)
    for offset in at_negated:
        struct.pack_into("=I", out, offset, (-pid) & 0xFFFFFFFF)
    return bytes(out)


def install(prepared: bytes | None = None) -> str:
    """Load the filter (``prepared`` by :func:`program` in this same
    process, or built now) into the calling process and its future threads."""
    prepared = prepared or program()
    if prepared is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {syscalls.MACHINE}")
    buf = ctypes.create_string_buffer(prepared, len(prepared))
    fprog = _SockFprog(len(prepared) // 8, ctypes.cast(buf, ctypes.c_void_p))
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    syscalls._check(syscalls._libc.prctl(syscalls.PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0), "seccomp")
    return f"allow list, {len(prepared) // 8} BPF instructions, {syscalls.MACHINE}"
