"""What the kernel says about a run's child from outside it: whether the
OOM killer struck, and whether the child has ended (read by the client
and RunState, never from anything the child says)."""
from __future__ import annotations

import time


def oom_kill_count() -> int:
    """The kernel's count of OOM kills since boot (``/proc/vmstat``, Linux
    ≥ 4.13; global and cgroup OOM kills alike); 0 where unreadable."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def ends_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` (unreaped: the server reaps only when asked)
    is a zombie within ``seconds``: it has ended, whatever ended it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True  # gone (or no /proc to ask): not alive as far as we can see
        if state in (b"Z", b"X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
