"""The sandbox's plain data types: what goes in (limits, probe calls) and
what comes out (one result per call, one result per run).

Kept apart from the client so that the fork-server and the child can import
them without importing the client.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# "coursekit.probes.softmax:softmax_output": only the shipped probe library may
# be called; a probe string is never a free-form import path.
PROBE_PATTERN = re.compile(r"^coursekit\.probes(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")

STATUSES = ("ok", "import_error", "timeout", "crashed", "memory", "output_limit", "tampered")

# Who ended a run (RunResult.ended_by). Only the last three are faults of the
# machine rather than results of the submission: see RunResult.from_outside.
ENDED_BY = ("itself", "limit", "oom_killer", "outside", "infrastructure")
FROM_OUTSIDE = ("oom_killer", "outside", "infrastructure")


@dataclass(frozen=True)
class Limits:
    """Per-run limits, as in course.yaml ``grading:``."""

    timeout_s: float
    cpu_s: float
    memory_mb: int
    output_limit_kb: int
    threads: int

    @classmethod
    def from_grading(cls, grading: Any, *, timeout_s: float | None = None, memory_mb: int | None = None) -> Limits:
        """From the course's ``grading`` section (any object with the five
        fields); ``timeout_s`` and ``memory_mb``, when given, override it (the
        command line's ``--timeout`` and ``--memory``)."""
        # `is None`, not `or`: an explicit 0 must not silently become the course's value
        # (the CLI refuses it; a caller passing one gets the limit it asked for).
        return cls(timeout_s=float(grading.timeout_s if timeout_s is None else timeout_s), cpu_s=float(grading.cpu_s),
                   memory_mb=int(grading.memory_mb if memory_mb is None else memory_mb), output_limit_kb=int(grading.output_limit_kb),
                   threads=int(grading.threads))


@dataclass(frozen=True)
class ProbeCall:
    """Call ``probe(module, **kwargs)`` in the sandbox.

    ``probe`` is ``"coursekit.probes.<module>:<function>"``; ``kwargs`` must be
    plain data (see :mod:`grader.sandbox.wire`).
    """

    probe: str
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not PROBE_PATTERN.match(self.probe):
            raise ValueError(f"probe must look like 'coursekit.probes.<module>:<function>', got {self.probe!r}")
        if type(self.kwargs) is not dict or any(type(k) is not str for k in self.kwargs):
            raise ValueError("ProbeCall.kwargs must be a dict with str keys")


@dataclass
class CallResult:
    """One probe call: its value, or the exception it raised (one line).

    ``cpu_s``: the child's CPU seconds from the moment the grader sent this
    call until its answer came, read by the grader from ``/proc``
    (:mod:`grader.sandbox.proc`), never from anything the child says;
    only for a call sent in a batch of its own (None otherwise, or where
    ``/proc`` could not tell).

    ``rss_before`` and ``peak_rss``: the child's resident memory when the
    grader sent this call, and its peak resident memory until the answer
    came, in bytes, read and reset by the grader from ``/proc`` alike (same
    conditions); ``peak_rss - rss_before`` is what the call itself needed
    at its peak."""

    ok: bool
    value: object = None
    error_type: str | None = None
    error: str | None = None
    cpu_s: float | None = field(default=None, compare=False)   # a measurement, not part of the result
    # Where the exception was raised, as the child tells it: (file relative
    # to the submission's folder, line). A claim: it shapes feedback text only.
    where: tuple[str, int] | None = field(default=None, compare=False)
    rss_before: int | None = field(default=None, compare=False)  # measurements, as cpu_s
    peak_rss: int | None = field(default=None, compare=False)

    @property
    def peak_growth(self) -> int | None:
        """Bytes the call's peak resident memory rose above what the child held when it was sent."""
        if self.rss_before is None or self.peak_rss is None:
            return None
        return max(0, self.peak_rss - self.rss_before)


def raised_where(value: object) -> tuple[str, int] | None:
    """A child's ``where`` ([file, line]) bounded and checked, else None."""
    if type(value) is not list or len(value) != 2 or type(value[0]) is not str or type(value[1]) is not int:
        return None
    name = "".join(c for c in value[0][:120] if c.isprintable())
    return (name, value[1]) if name and 0 < value[1] < 10**7 else None


@dataclass
class RunResult:
    """One run of a module: a result per completed call, in order (fewer
    than requested when the run ended early).

    ``status``: ``ok`` (every call ran; some may have failed), ``import_error``
    (the module did not import; no calls), ``timeout`` (wall clock or CPU
    limit), ``crashed`` (the child died or exited before finishing: signal,
    ``os._exit``), ``memory`` (a call hit the address-space limit; the other
    calls still ran), ``output_limit`` (stdout or stderr passed
    ``output_limit_kb``), ``tampered`` (the child's frames broke the
    protocol in a way its own sender never does: forged, extra, missing or
    out of order, or its pipes were used by someone else; ``calls`` is then
    empty: nothing it sent back is kept). ``reason`` says it in words, with
    the call that was running.
    ``stdout``/``stderr`` are capped and only for showing: no verdict is
    ever read from them.

    ``ended_by`` says who ended the run, from what the grader itself saw
    (never from anything the child says about itself):

    * ``itself``: the child finished, or ended in a way it can cause on its
      own (an exit, a crash, a signal to itself, a result stream it closed);
    * ``limit``: one of the run's limits (wall clock, CPU, output cap);
    * ``oom_killer``: SIGKILL while the kernel's OOM-kill counter moved;
    * ``outside``: SIGKILL that neither the grader nor the child can have
      sent (an operator's ``kill -9``): concluded only where the seccomp
      layer is active, which stops a child from SIGKILLing itself;
    * ``infrastructure``: the fork-server died or lost the child.
    """

    status: str
    calls: list[CallResult]
    reason: str
    stdout: str
    stderr: str
    wall_s: float
    ended_by: str = "itself"

    @property
    def from_outside(self) -> bool:
        """Ended by a fault of the machine (OOM killer, an operator, the
        sandbox's own server), not by the submission: worth running again."""
        return self.ended_by in FROM_OUTSIDE
