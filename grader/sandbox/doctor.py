"""``grader doctor``: which sandbox layers work on this machine, proved by a
live run, with a hint for each one that does not."""
from __future__ import annotations

import os
import platform
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import landlock, policy, syscalls
from grader.sandbox.client import Sandbox
from grader.sandbox.model import Limits, ProbeCall

HINTS = {
    "namespaces": "an ordinary user needs unprivileged user namespaces: `sysctl kernel.unprivileged_userns_clone=1` "
                  "(Debian) or `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu ≥ 23.10); "
                  "in a container, root needs CAP_SYS_ADMIN. Without them seccomp alone blocks sockets and "
                  "Landlock alone guards the files.",
    "filesystem_view": "needs the mount namespace (see namespaces); Landlock still guards the files.",
    "landlock": "needs Linux ≥ 5.13 with Landlock in the LSM list (`cat /sys/kernel/security/lsm`, boot with "
                "lsm=landlock,...); the mount-namespace view still guards the files.",
    "seccomp": "needs x86_64 or aarch64 with CONFIG_SECCOMP_FILTER (and GRADER_SANDBOX_SECCOMP_LOG unset); without "
               "it a child can open sockets, start programs, make any system call, and SIGKILL itself (so that "
               "such a kill cannot be told from an operator's or the OOM killer's, and is never graded again).",
    "rlimits": "setrlimit failed: memory and CPU limits are not enforced (the wall-clock timeout still is).",
    "uid_drop": "the child keeps root: set GRADER_SANDBOX_UID to an unused uid that exists on this machine.",
    "capabilities_dropped": "the child keeps the capabilities of its user namespace.",
}

PROBE = """
import ctypes, os, signal, socket
def unlisted(number):
    libc = ctypes.CDLL(None, use_errno=True)
    if number is None or libc.syscall(number, 0xffffffff) == -1:
        raise OSError(ctypes.get_errno(), "denied")
def attempts(secret, personality):
    out = {}
    for name, attempt in (("read solutions/", lambda: open(secret).read()),
                          ("open a socket", lambda: socket.socket()),
                          ("fork", os.fork),
                          ("call personality(), which no allow list names", lambda: unlisted(personality)),
                          ("SIGKILL itself", lambda: os.kill(os.getpid(), signal.SIGKILL))):
        try:
            attempt()
            out[name] = "NOT BLOCKED"
        except OSError as exc:
            out[name] = f"blocked ({type(exc).__name__})"
    return out
"""


# personality(2)'s number: a call no grading needs, so the allow list leaves it out.
PERSONALITY = {"x86_64": 135, "aarch64": 92}


@dataclass
class Report:
    """What doctor found: lines to print and whether anything is missing."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def diagnose(limits: Limits) -> Report:
    """Start a Sandbox, run a trivial module and a few attacks, and report."""
    report = Report()
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()} (not root)"
    report.lines.append(f"machine: Linux {platform.release()} {platform.machine()}, running as {who}")
    abi = landlock.abi_version()
    report.lines.append(f"kernel: Landlock ABI {abi or 'unavailable'}; seccomp syscall table "
                        f"{'available' if syscalls.supported() else 'missing'} for {syscalls.MACHINE}")
    with Sandbox(limits) as box, tempfile.TemporaryDirectory(prefix="sandbox-doctor-") as folder:
        info = box.info()
        report.lines.append(f"fork-server: {info['executable']} (Python {info['python']}, torch {info['torch']}), "
                            f"warm-up {info['warmup_s']:.1f} s, {info['vm_mb']} MiB address space")
        if info["vm_mb"] * 2 > limits.memory_mb:
            report.problems.append(f"memory_mb = {limits.memory_mb} leaves little room above the "
                                   f"{info['vm_mb']} MiB a child starts with")
        os.chmod(folder, 0o755)
        Path(folder, "doctor_probe.py").write_text(PROBE)
        secret = policy.REPO_ROOT / "solutions"
        secret = next(secret.glob("*/*.py"), secret / "missing.py")
        result = box.run(Path(folder), "doctor_probe",
                         [ProbeCall("coursekit.probes.sandbox_selftest:call",
                                    {"name": "attempts",
                                     "args": [str(secret), PERSONALITY.get(syscalls.MACHINE)]})])
        report.lines.append("layers:")
        for name, state in box.layers().items():
            report.lines.append(f"  {'✓' if state == 'active' else '✗'} {name}: {state}")
            if state != "active":
                report.problems.append(f"{name} is missing: {HINTS.get(name, state)}")
        if result.status != "ok" or not result.calls or not result.calls[0].ok:
            report.problems.append(f"the self-check run failed: {result.status}: {result.reason} {result.stderr}")
        else:
            report.lines.append(f"self-check run ({result.wall_s * 1000:.0f} ms):")
            for attempt, outcome in result.calls[0].value.items():
                report.lines.append(f"  {attempt}: {outcome}")
                if outcome == "NOT BLOCKED":
                    report.problems.append(f"a sandboxed child could {attempt}")
    return report
