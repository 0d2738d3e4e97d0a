"""Dask's preload for grading workers: ``dask worker ADDRESS --preload
grader.scale.preload`` (the LocalCluster of ``grader grade --executor dask``
uses it too).

As the worker starts, it spawns its sandbox fork-server (torch's import and
warm-up, ~2 s) and imports the grader meanwhile, side by side on two cores,
as ``grader grade`` does (grader/sandbox/prestart.py). The first run finds
the worker ready instead of paying for both while the class waits. This
module imports nothing heavy until then.
"""
from __future__ import annotations

from grader.sandbox import prestart


def dask_setup(worker: object = None) -> None:
    """Called by Dask once the module is imported, before the worker joins."""
    prestart.start_early()
    import grader.scale.worker  # noqa: F401 - the grader's imports, beside the fork-server's
