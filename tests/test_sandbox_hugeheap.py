"""The fork-server backs its heap with huge pages when idle
(grader.sandbox.hugeheap): best effort, never an error, and where the
kernel can (Linux >= 6.1, transparent huge pages madvise or always) the
memory really ends up in huge pages."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import hugeheap

_ROOT = Path(__file__).resolve().parents[1]


def _kernel_can() -> bool:
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    major, minor = (int(n) for n in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    return ("[madvise]" in mode or "[always]" in mode) and (major, minor) >= (6, 1)


_COLLAPSE_A_LARGE_HEAP = """
import sys
from grader.sandbox import hugeheap
block = bytearray(64 << 20)  # a large anonymous region, written
done = hugeheap.collapse()
huge = [int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages")][0]
print(done, huge)
"""


def test_collapsing_never_fails_and_says_how_much_it_did():
    # In a fresh process: this one's heap is pytest's.
    done = subprocess.run([sys.executable, "-c", _COLLAPSE_A_LARGE_HEAP], cwd=_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    collapsed, huge_kb = (int(n) for n in done.stdout.split())
    assert collapsed >= 0
    if _kernel_can():
        assert collapsed >= 60 << 20 and huge_kb >= 60 << 10
    else:
        pytest.skip("this kernel cannot collapse memory into huge pages (nothing to check beyond no error)")


def test_only_large_anonymous_writable_regions_are_chosen():
    for start, end in hugeheap._regions():
        assert end - start >= hugeheap._MIN_REGION
