"""Generic probes used by the sandbox's own tests and by ``grader doctor``:
they call a module's function by name, nothing exercise-specific."""
from __future__ import annotations

from types import ModuleType
from typing import Any


def call(module: ModuleType, name: str, args: list | tuple = (), kwargs: dict | None = None) -> Any:
    """``getattr(module, name)(*args, **kwargs)``, returned as is."""
    return getattr(module, name)(*args, **(kwargs or {}))


def attribute(module: ModuleType, name: str) -> Any:
    """``getattr(module, name)``, returned as is."""
    return getattr(module, name)
