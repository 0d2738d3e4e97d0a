"""The fork-server's heap in 2 MiB pages, so that each fork copies less.

A fork copies the page table entries of every private page the parent has
written: the server's heap (torch and the probe library, ~90 MB here) is
~22,000 entries of 4 KiB, copied for every child and torn down when it
exits. In transparent huge pages it is ~45 entries. A child's first write
to one of them splits it and copies 4 KiB, as before.

Measured on the course's 2-core machine (exercise 01's checks): the fork
went from 2.3 to 1.2 ms, and a child's CPU from ~30.5 to ~28.8 ms; after
300 forks ~85 % of the heap was still in huge pages (the server's own
writes split a few).

Best effort: ``MADV_COLLAPSE`` needs Linux 6.1 and transparent huge pages
set to ``madvise`` or ``always``; anywhere else the heap stays as it was.
A page a live child shares is copied into the huge page, and the child
keeps its own.

It is done one 2 MiB piece at a time (:func:`pieces`, :func:`collapse_piece`),
each when the server has no message waiting: the whole heap takes ~0.3 s
here (~5 ms a piece; a fresh virtual machine backs each new huge page on
first touch), and done at once it stalled every run of a class that waited
to start meanwhile (three runs of exercise 01 took 0.27 s instead of ~0.03).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_HUGE = 2 << 20
# Anonymous private regions at least this large are worth collapsing.
_MIN_REGION = 4 << 20


def _regions() -> list[tuple[int, int]]:
    """(start, end) of the large anonymous writable private mappings."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            span, perms = fields[0], fields[1]
            anonymous = len(fields) < 6 or fields[5] == "[heap]"
            if perms.startswith("rw") and perms.endswith("p") and anonymous:
                start, end = (int(n, 16) for n in span.split("-"))
                if end - start >= _MIN_REGION:
                    found.append((start, end))
    return found


def pieces() -> list[tuple[int, int]]:
    """The whole 2 MiB pages inside the large anonymous regions, as
    (start, end) ranges of one huge page each; none where /proc cannot
    be read."""
    try:
        regions = _regions()
    except (OSError, ValueError):
        return []
    found = []
    for start, end in regions:
        start, end = (start + _HUGE - 1) & ~(_HUGE - 1), end & ~(_HUGE - 1)  # whole huge pages inside
        found += [(at, at + _HUGE) for at in range(start, end, _HUGE)]
    return found


def collapse_piece(piece: tuple[int, int]) -> bool:
    """Back one piece with a huge page; whether the kernel did. A piece
    unmapped since :func:`pieces` listed it, or one never written, fails
    harmlessly."""
    madvise = _madvise()
    if madvise is None:
        return False
    start, end = piece
    return madvise(start, end - start, _MADV_HUGEPAGE) == 0 and madvise(start, end - start, _MADV_COLLAPSE) == 0


@functools.cache
def _madvise():
    """libc's madvise, loaded once; None where it cannot be."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc.madvise
    except (OSError, AttributeError):
        return None
