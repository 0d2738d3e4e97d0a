"""What a child may read: an explicit allow-list, never derived blindly
from ``sys.path`` (which holds the repository root when the grader runs
with ``python -m``, and with it ``solutions/`` and ``grader/``).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COURSEKIT = REPO_ROOT / "coursekit"

# System files the interpreter and torch's shared libraries may open lazily.
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime",
               "/sys/devices/system/cpu")
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


def _is_ancestor_or_same(a: Path, b: Path) -> bool:
    return a == b or a in b.parents


def read_paths(server_sys_path: Sequence[str], allow_read: Iterable[Path], protect: Path = REPO_ROOT) -> list[str]:
    """The readable paths: the server interpreter's import path minus
    anything at or above ``protect`` (the repository) and, inside it,
    anything but installed packages (a ``.venv`` in the repository), then the
    repository's ``coursekit/``, the system folders and ``allow_read``.

    A system folder that contains ``protect`` (a repository under /usr) is
    split into its other children, so that the repository stays out.
    Raises ValueError when an ``allow_read`` path would expose ``protect``.
    """
    protect = protect.resolve()
    paths: list[Path] = []
    for entry in server_sys_path:
        if not entry or not os.path.isdir(entry):
            continue
        path = Path(entry).resolve()
        if _is_ancestor_or_same(path, protect):
            continue
        if protect in path.parents and not {"site-packages", "dist-packages"} & set(path.parts):
            continue
        paths.append(path)
    paths.append(COURSEKIT.resolve())
    for system in SYSTEM_READ:
        paths.extend(_split_around(Path(system), protect))
    for extra in allow_read:
        extra = Path(extra).resolve()
        if _is_ancestor_or_same(extra, protect):
            raise ValueError(f"allow_read path {extra} would expose the repository {protect} "
                             "(solutions/ and grader/ must stay unreadable)")
        paths.append(extra)
    # A non-editable install puts a copy of grader/ (hidden checks) into
    # site-packages, which is readable: carve it out.
    for installed in _installed_copies(paths):
        paths = [part for path in paths for part in _split_around(path, installed)]
    seen, result = set(), []
    for path in paths:
        if str(path) not in seen:
            seen.add(str(path))
            result.append(str(path))
    return result


def _installed_copies(paths: list[Path]) -> list[Path]:
    """Copies of the instructor's package (``grader/``) inside readable folders."""
    package = Path(__file__).resolve().parents[1].name
    found = []
    for path in paths:
        candidate = path / package
        if (candidate / "sandbox").is_dir() and candidate.resolve() != REPO_ROOT / package:
            found.append(candidate.resolve())
    return found


def _split_around(path: Path, protect: Path) -> list[Path]:
    """``path``, or, when it contains ``protect``, its children except the
    branch that leads to ``protect`` (recursively)."""
    real = path.resolve() if path.exists() else path
    if not _is_ancestor_or_same(real, protect):
        return [path] if os.path.lexists(path) else []
    if real == protect:
        return []
    branch = protect.relative_to(real).parts[0]
    result: list[Path] = []
    for child in sorted(real.iterdir()):
        result.extend(_split_around(child, protect) if child.name == branch else [child])
    return result
