"""Comparing the isolation layers of two machines' sandboxes.

A sandbox reports each layer as ``"active"`` or ``"missing: reason"``
(:meth:`grader.sandbox.Sandbox.layers`). Grading elsewhere (a Dask worker)
must not isolate less than grading here would: :func:`weaker_than` names
every layer active here that the other machine lacks, with its reason.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

# A root grader's child changes its uid; an ordinary user's child already
# runs unprivileged and drops its namespace's capabilities instead. Either
# one is the same guarantee: the child keeps no privilege.
PRIVILEGE_DROP = "privilege_drop"
_ALTERNATIVES = {"uid_drop": PRIVILEGE_DROP, "capabilities_dropped": PRIVILEGE_DROP}

# Every layer a full-strength sandbox has: what a machine that cannot run the
# sandbox itself (not Linux) asks of the machines that grade for it.
ALL_LAYERS = frozenset({"fork_server", "session", "namespaces", "filesystem_view", "rlimits", "landlock",
                        PRIVILEGE_DROP, "seccomp"})


def active_layers(layers: Mapping[str, str]) -> frozenset[str]:
    """The names of the active layers (uid_drop and capabilities_dropped as one)."""
    return frozenset(_ALTERNATIVES.get(name, name) for name, state in layers.items() if state == "active")


def weaker_than(required: Iterable[str], layers: Mapping[str, str]) -> list[str]:
    """``"layer: its state"`` for each required layer that ``layers`` lacks
    (an empty list: at least as strong)."""
    have = active_layers(layers)
    reasons = []
    for name in sorted(set(required) - have):
        states = [f"{n}: {s}" for n, s in sorted(layers.items()) if _ALTERNATIVES.get(n, n) == name]
        reasons.append("; ".join(states) if states else f"{name}: not reported")
    return reasons
