"""The fork-server backs its heap with huge pages when idle
(grader.sandbox.hugeheap): best effort, never an error, and where the
kernel can (Linux >= 6.1, transparent huge pages madvise or always) the
memory really ends up in huge pages."""
from __future__ import annotations

import os
import time
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
done = sum(end - start for start, end in hugeheap.pieces() if hugeheap.collapse_piece((start, end)))
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


_COLLAPSE_ONE_PIECE = """
import mmap
from grader.sandbox import hugeheap
block = bytearray(16 << 20)  # written: a region of its own, large enough to be chosen
start = next(s for s, e in hugeheap._regions() if e - s >= 16 << 20)
pieces = hugeheap.pieces()
mine = [p for p in pieces if start <= p[0] < start + (16 << 20)]
done = [hugeheap.collapse_piece(p) for p in mine]
gone = hugeheap.collapse_piece((0, 2 << 20))  # nothing is mapped there: fails, raises nothing
huge = [int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages")][0]
print(len(mine), sum(done), gone, huge)
"""


def test_the_heap_is_cut_into_whole_huge_pages():
    # The server collapses one piece whenever no message waits: each must be
    # exactly one aligned 2 MiB page inside a chosen region, none twice.
    regions = hugeheap._regions()
    pieces = hugeheap.pieces()
    assert len(set(pieces)) == len(pieces)
    for start, end in pieces:
        assert end - start == 2 << 20 and start % (2 << 20) == 0
        assert any(low <= start and end <= high for low, high in regions)


def test_one_piece_at_a_time_collapses_a_written_region():
    done = subprocess.run([sys.executable, "-c", _COLLAPSE_ONE_PIECE], cwd=_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed, collapsed, gone, huge_kb = done.stdout.split()
    assert int(listed) >= 7 and gone == "False"  # 16 MiB, unaligned: at least 7 whole pages inside
    if not _kernel_can():
        pytest.skip("this kernel cannot collapse memory into huge pages (nothing to check beyond no error)")
    assert int(collapsed) == int(listed) and int(huge_kb) >= int(listed) * 2048


def test_the_fork_server_collapses_its_heap_between_runs(tmp_path):
    # Wiring: after COLLAPSE_AFTER runs the server works through the pieces
    # while it waits for messages; a few runs later its heap is in huge pages.
    from grader.sandbox import Limits, Sandbox, server
    from probecalls import selftest_call, submission_folder

    if not _kernel_can():
        pytest.skip("this kernel cannot collapse memory into huge pages")
    folder = submission_folder(tmp_path, "def double(x):\n    return x * 2\n", module_name="submission")
    with Sandbox(Limits(timeout_s=20, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=1)) as box:
        pid = box.info()["pid"]
        for _ in range(server.COLLAPSE_AFTER + 3):
            assert box.run(folder, "submission", [selftest_call("double", 2)]).status == "ok"

        def huge_kb() -> int:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            return int(re.search(r"AnonHugePages:\s+(\d+)", rollup).group(1))

        for _ in range(100):  # the pieces are worked through while nothing waits: ~0.3 s here
            if huge_kb() >= 16 << 10:
                break
            time.sleep(0.1)
        assert huge_kb() >= 16 << 10
