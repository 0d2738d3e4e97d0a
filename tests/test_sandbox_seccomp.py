"""The seccomp layer is an allow list (issue 13): calls it does not name are
denied, in a live child and, without a kernel, by running the BPF program
in a small interpreter here for both architectures."""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import signal
import struct
import subprocess

import pytest

from grader.sandbox import Limits, Sandbox, seccomp, syscalls
from probecalls import selftest_call, submission_folder

LIMITS = Limits(timeout_s=8, cpu_s=4, memory_mb=2048, output_limit_kb=16, threads=2)


call, module = selftest_call, submission_folder
@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(LIMITS) as box:
        yield box


# x86_64 numbers of calls no grading needs, named and unnamed by the filter.
UNNEEDED = {"bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "keyctl": 250, "add_key": 248, "mount": 165,
            "unshare": 272, "ptrace": 101, "perf_event_open": 298,
            # allowed by the old deny list: not named now, hence denied
            "personality": 135, "sync": 162, "setsid": 112, "shmget": 29, "msgget": 68, "memfd_create": 319,
            "inotify_init1": 294, "fanotify_init": 300, "lsm_get_self_attr": 459, "mseal": 462,
            "a future call": 600}


@pytest.mark.skipif(syscalls.MACHINE != "x86_64", reason="raw x86_64 numbers")
def test_calls_outside_the_allow_list_are_denied(sandbox, tmp_path):
    source = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def try_call(nr):
    ctypes.set_errno(0)
    return [libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()]
'''
    result = sandbox.run(module(tmp_path, source), "submission", [call("try_call", nr) for nr in UNNEEDED.values()])
    assert result.status == "ok", result.reason
    for name, got in zip(UNNEEDED, result.calls):
        assert got.value[0] == -1 and got.value[1] in (errno.EPERM, errno.ENOSYS), (name, got.value)


def _run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Classic BPF, as much of it as the filter uses, over a seccomp_data."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:
            return k
        elif code == 0x05:
            pc += k
        else:
            taken = {0x15: a == k, 0x35: a >= k, 0x45: bool(a & k)}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize("machine", sorted(syscalls.TABLES))
def test_the_filter_allows_only_its_list(machine):
    table, arch, pid = syscalls.TABLES[machine], syscalls.AUDIT_ARCH[machine], 4321
    program = seccomp.build_filter(pid, table, arch)
    decide = lambda name, *args: _run_bpf(program, table[name], arch, args)  # noqa: E731
    eperm, enosys = seccomp.RET_ERRNO | errno.EPERM, seccomp.RET_ERRNO | errno.ENOSYS
    for name in seccomp.ALLOWED:
        if name in table:
            assert decide(name) == seccomp.RET_ALLOW, name
    for name in seccomp.DENIED:
        if name in table:
            assert decide(name) == eperm, name
    assert decide("socket") == seccomp.RET_ERRNO | errno.EAFNOSUPPORT and decide("clone3") == enosys
    unlisted = set(range(600)) - set(table.values())
    assert all(_run_bpf(program, nr, arch) == enosys for nr in unlisted)
    assert _run_bpf(program, table["read"], arch ^ 1) == seccomp.RET_KILL_PROCESS  # another calling convention
    assert decide("clone", syscalls.CLONE_THREAD) == seccomp.RET_ALLOW and decide("clone", 17) == eperm
    assert decide("kill", pid, signal.SIGUSR1) == seccomp.RET_ALLOW
    assert decide("kill", pid, signal.SIGKILL) == eperm and decide("kill", 0, signal.SIGKILL) == eperm
    assert decide("kill", 1, signal.SIGUSR1) == eperm
    assert decide("tgkill", pid, pid + 1, signal.SIGSEGV) == seccomp.RET_ALLOW
    assert decide("tgkill", pid, pid + 1, signal.SIGKILL) == eperm
    assert decide("rt_sigqueueinfo", pid, signal.SIGKILL) == eperm
    assert decide("prlimit64", 0, 0, 0, 0x7FFF0000) == seccomp.RET_ALLOW  # read only
    assert decide("prlimit64", 0, 0, 0x7FFF00001000) == eperm and decide("prlimit64", 0, 0, 1 << 32) == eperm
    assert decide("prlimit64", pid + 1, 0, 0) == eperm
    assert decide("fcntl", 3, 4) == seccomp.RET_ALLOW and decide("fcntl", 3, seccomp.F_SETSIG) == eperm
    assert all(decide("fcntl", 3, command) == eperm for command in seccomp.F_LOCKS)  # no locks: issue 36
    assert decide("flock", 3, 2) == eperm
    log = seccomp.build_filter(pid, table, arch, log=True)
    assert _run_bpf(log, max(unlisted), arch) == seccomp.RET_LOG and _run_bpf(log, table["bpf"], arch) == eperm


@pytest.mark.skipif(not ctypes.util.find_library("seccomp"), reason="libseccomp is not installed")
def test_every_architecture_s_numbers_agree_with_libseccomp():
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp"))
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    for machine, table in syscalls.TABLES.items():
        for name, number in table.items():
            assert lib.seccomp_syscall_resolve_name_arch(syscalls.AUDIT_ARCH[machine], name.encode()) == number, name


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dmesg"), reason="reading the kernel log needs root")
def test_log_mode_reports_itself_and_logs_unlisted_calls(tmp_path, monkeypatch):
    monkeypatch.setenv(seccomp.LOG_ENV, "1")
    source = "import ctypes\ndef personality():\n    return ctypes.CDLL(None).syscall(135, 0xffffffff)\n"
    with Sandbox(LIMITS) as box:
        result = box.run(module(tmp_path, source), "submission", [call("personality")])
        assert box.layers()["seccomp"].startswith("log only")
    assert result.status == "ok" and result.calls[0].value != -1  # allowed, and logged
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    assert "syscall=135" in log


@pytest.mark.parametrize("log", [False, True])
def test_the_template_written_with_a_pid_is_the_program_built_for_it(log):
    """Each child writes its pid into a program the fork-server built once:
    byte for byte what building it for that pid gives, for any pid."""
    arch = syscalls.AUDIT_ARCH["x86_64"]
    template = seccomp._template(arch, log)
    assert len(template[1]) >= 5 and len(template[2]) == 1  # kill's pid or -pid, tgkill, prlimit64, ...
    for pid in (1, 2, 999, 12345, 4194303, os.getpid()):
        assert seccomp.for_pid(template, pid) == seccomp.build_filter(pid, syscalls.NR, arch, log), pid


LOCKS = """
import fcntl, os, struct
def lock(how):
    fd = os.open("/etc/ld.so.cache", os.O_RDONLY)
    try:
        if how == "flock":
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        elif how == "lockf":
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        else:  # an open file description lock, F_OFD_SETLK (37), read lock
            fcntl.fcntl(fd, 37, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0) + bytes(4))
        return "locked"
    except OSError as exc:
        return exc.errno
    finally:
        os.close(fd)
def unlocked_fcntl():
    return fcntl.fcntl(0, fcntl.F_GETFD) >= 0
"""


def test_no_child_can_lock_a_file_another_can_see(sandbox, tmp_path):
    """flock or fcntl locks on a world-readable file were a channel between
    two children running at once (issue 36): the sandbox denies them all,
    and fcntl's other commands still work."""
    if not os.path.exists("/etc/ld.so.cache"):
        pytest.skip("no /etc/ld.so.cache here")
    calls = [call("lock", how) for how in ("flock", "lockf", "ofd")] + [call("unlocked_fcntl")]
    result = sandbox.run(module(tmp_path, LOCKS), "submission", calls)
    assert result.status == "ok", result.reason
    assert [c.value for c in result.calls] == [errno.EPERM] * 3 + [True]
