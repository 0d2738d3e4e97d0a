"""The garbage collector while torch is imported.

Importing torch makes ~170k objects and next to no garbage (~7k of them
collected here), and they live as long as the process. Collections that
walk them find nothing: those that run during the import (~0.08 s of the
fork-server's start-up, which every grading command waits for), and those
that follow it as the new objects age through the generations (~0.17 s of
the grader's own start-up). :func:`frozen_imports` runs the imports with
the collector paused and freezes what they made: in the grader's process,
its fork-server, and a student's ``pytest exercises/NN`` (the plugin).
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Run the block (imports, a warm-up) without automatic collections;
    when it ends, freeze every object then alive (``gc.freeze``) and give
    the collector back as it was, even when the block raises. Both halves
    are needed: a pause alone leaves the new objects in the youngest
    generation, whose next collection walks them all at once (56 ms, then
    46 and 66 ms as they aged, in `grader grade` here). An in-process
    caller's heap stays frozen until something unfreezes it (the grader's
    grading does, when it ends: settled_heap in grader/run/grading.py)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
