"""What the grader reads from ``/proc`` about a child, from outside it:
whether it has ended, the kernel's OOM kills, the CPU time it has used and
its peak resident memory (work measured from outside the child, which
nothing in it can rewrite).

CPU time: two readings of one process, both kept, because each misses
what the other sees:

* *fine*: the sum over its live threads of ``/proc/<pid>/task/<tid>/schedstat``
  (nanoseconds on the CPU): precise, but a thread that ended is no longer
  listed;
* *coarse*: ``utime + stime`` of ``/proc/<pid>/stat`` (clock ticks, usually
  10 ms): the whole thread group, ended threads included.

:func:`spent` takes the larger of the fine difference and the least the
coarse one proves, so work done in a thread that ends before the second
reading is still counted, to within one tick. The coarse readings are the
thread group's exact run time cut down to whole ticks, so their
difference lies within one tick of the truth either way: taken as it is,
it added up to 10 ms to a single-threaded call of 10 to 20 ms (exercise
14's cached steps and chunks), more in one run than in the next. The
sandbox's seccomp filter allows threads only (no ``fork``), so the child's
own process is all there is to read.
"""
from __future__ import annotations

import os
import time

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

Reading = tuple[float, float]  # (fine, coarse) seconds


def read(pid: int) -> Reading | None:
    """Process ``pid``'s CPU seconds so far, (fine, coarse); None when
    ``/proc`` cannot tell (no such process, no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        coarse = (int(fields[11]) + int(fields[12])) / _TICKS   # utime, stime: fields 14 and 15 of stat
        fine = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    fine += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):  # a thread that just ended
                continue
    except (OSError, ValueError, IndexError):
        return None
    return fine / 1e9, coarse


def spent(before: Reading | None, after: Reading | None) -> float | None:
    """CPU seconds used between two readings of one process (None if
    either is missing): the larger of the fine difference and the coarse
    difference less the one tick it may overstate by."""
    if before is None or after is None:
        return None
    return max(after[0] - before[0], after[1] - before[1] - 1 / _TICKS, 0.0)


def memory_mark(pid: int) -> int | None:
    """Reset process ``pid``'s peak resident memory (VmHWM) to what it holds
    now (writing "5" to ``/proc/<pid>/clear_refs``, Linux >= 4.0) and return
    that resident memory in bytes; None where ``/proc`` cannot tell.

    Where the reset is refused (another uid, a child that made itself
    non-dumpable), the peak read later is its peak since it started: never
    below the call's own, so such a figure can only take points away.
    Landlock keeps ``/proc`` out of the child's reach, so nothing in it can
    reset the peak in the middle of a call."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status_bytes(pid, b"VmRSS:")


def memory_peak(pid: int) -> int | None:
    """Process ``pid``'s peak resident memory in bytes (VmHWM) since its last
    :func:`memory_mark` (or its start); None where ``/proc`` cannot tell."""
    return _status_bytes(pid, b"VmHWM:")


def _status_bytes(pid: int, field: bytes) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024   # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


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
