"""Run probes from ``coursekit.probes`` on an untrusted module, in a
confined child process, and get plain data back.

The sandbox knows nothing about exercises, checks or solutions: a run is
"import this module from this folder and call these probes on it". See
``client.py`` (the grader side), ``server.py`` (the fork-server),
``child.py`` (the confined run) and the layers it applies:
``namespaces.py``, ``landlock.py``, ``limits.py``, ``seccomp.py``;
``wire.py`` is the framing and the safe decoding of results.
"""
from grader.sandbox.client import Sandbox, SandboxError
from grader.sandbox.model import CallResult, Limits, ProbeCall, RunResult

__all__ = ["CallResult", "Limits", "ProbeCall", "RunResult", "Sandbox", "SandboxError"]
