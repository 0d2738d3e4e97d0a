"""The garbage collector while the grader imports what it needs.

Importing torch makes ~170k objects and next to no garbage (~7k of them
collected here): the collections that run meanwhile walk an ever larger
heap for nothing, ~0.08 s of each process's start-up, the fork-server's
and the grader's, which every grading command waits for. Their imports
run with the collector paused; what they made is then frozen (the
server, before it forks) or left to the collector as usual.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic garbage collection inside the block; the collector is
    as it was after it, even when the block raises."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
