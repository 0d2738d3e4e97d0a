"""Run probes from ``coursekit.probes`` on an untrusted module, in a
confined child process, and get plain data back.

The sandbox knows nothing about exercises, checks or solutions: a run is
"import this module from this folder and call these probes on it". See
``client.py`` (the grader side), ``server.py`` (the fork-server),
``child.py`` (the confined run) and the layers it applies:
``namespaces.py``, ``landlock.py``, ``limits.py``, ``seccomp.py``;
``wire.py`` is the framing and the safe decoding of results.

In:  a module's folder, probe calls and the course's limits.
Out: plain data (values, errors by kind, resource facts), never an object
     the student's code made.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.sandbox.client import Sandbox, SandboxError
    from grader.sandbox.model import CallResult, Limits, ProbeCall, RunResult

# Loaded on first use: the client imports torch (through wire.py), and
# ``prestart`` must start the fork-server before the grader pays for that.
_HOME = {"Sandbox": "client", "SandboxError": "client", "CallResult": "model", "Limits": "model",
         "ProbeCall": "model", "RunResult": "model"}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"grader.sandbox.{_HOME[name]}"), name)


__all__ = ["CallResult", "Limits", "ProbeCall", "RunResult", "Sandbox", "SandboxError"]
