"""``grader doctor --scheduler ADDRESS``: each Dask worker's sandbox layers,
proved by a live run on that worker, against this machine's.

A worker that lacks a layer this machine has is one that ``grader grade
--executor dask`` refuses to grade on (grader/scale/worker.py): the doctor
says so before a run does.
"""
from __future__ import annotations

import uuid

from grader.sandbox import Limits
from grader.sandbox.doctor import Report
from grader.sandbox.layers import ALL_LAYERS
from grader.scale.dask_executor import ClusterLost, instructor_layers, vet_workers
from grader.scale.worker import RunSpec


def diagnose_cluster(address: str, limits: Limits, course_path: str) -> Report:
    """Vet every worker of the scheduler at ``address``; one report."""
    from distributed import Client

    report = Report()
    required = instructor_layers(limits)
    report.lines.append("this machine's sandbox layers (what every worker must have): " + ", ".join(sorted(required))
                        + (" (this machine cannot run the sandbox: every layer)" if required == ALL_LAYERS else ""))
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ClusterLost(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client:
        workers = sorted(client.scheduler_info().get("workers", {}))
        if not workers:
            report.problems.append(f"no worker is connected to {address}")
        spec = RunSpec(f"doctor-{uuid.uuid4().hex[:8]}", course_path, limits, None, required)
        for worker, found in vet_workers(client, spec, workers).items():
            report.lines.append(f"worker {worker} on {found['where']}:")
            for name, state in found["layers"].items():
                report.lines.append(f"  {'✓' if state == 'active' else '✗'} {name}: {state}")
            if found["refused"]:
                report.problems.append(f"{worker}: {found['refused']}")
            else:
                report.lines.append("  grades: at least as isolated as this machine")
    return report
