"""Import an exercise's module from its own folder.

Several exercise folders ship modules with the same name (part B ships the
earlier exercises' code as working modules), so ``import attention`` must
mean *this folder's* ``attention.py`` even when another folder's was imported
earlier in the same pytest session.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from types import ModuleType


class ExerciseImportError(Exception):
    """The student's module could not be imported (syntax error, missing
    file, error at import time). Carries a message meant for the student."""


# Python's message when a module lacks a name asked of it (``AttributeError:``
# in front when the text is an error's type and message together).
_MISSING_NAME = re.compile(r"^(?:AttributeError: )?module '(\w+)' has no attribute '(\w+)'$")


def missing_name(error: str) -> tuple[str, str] | None:
    """(module, name) when ``error`` says a module has no such name (a
    misspelt or renamed function), else None. The pytest plugin and the
    grader's verdicts both turn it into one clear line."""
    match = _MISSING_NAME.match(error)
    return (match.group(1), match.group(2)) if match else None


def _forget_foreign_siblings(folder: Path) -> None:
    """Drop cached modules that share a name with a file in ``folder`` but
    were loaded from somewhere else."""
    for name in os.listdir(folder):  # not Path.glob: its pattern's first compile cost each sandboxed child ~1 ms
        stem = name[:-3] if name.endswith(".py") else None
        cached = sys.modules.get(stem) if stem else None
        if cached is None:
            continue
        origin = getattr(cached, "__file__", None)
        if origin is None or Path(origin).resolve().parent != folder:
            del sys.modules[stem]


def load_module(folder: Path | str, module_name: str) -> ModuleType:
    """Import ``folder/module_name.py`` (and let it import its siblings)."""
    folder = Path(folder).resolve()
    module_name = module_name.removesuffix(".py")
    if not (folder / f"{module_name}.py").is_file():
        raise ExerciseImportError(f"{module_name}.py is missing from {folder.name}/")
    _forget_foreign_siblings(folder)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(module_name)
    except SyntaxError as exc:
        raise ExerciseImportError(
            f"{module_name}.py has a syntax error on line {exc.lineno}: {exc.msg}"
        ) from exc
    except Exception as exc:  # student code: anything can happen at import
        raise ExerciseImportError(
            f"importing {module_name}.py raised {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        sys.path.remove(str(folder))


def load_shipped(module: ModuleType, name: str) -> ModuleType:
    """The module ``name`` shipped beside the student's ``module`` (an earlier
    exercise's reference, in the same folder). A notebook's answer is a
    module whose file is a copy in a temporary folder (coursekit/notebook.py):
    its shipped modules lie in the folder the notebook runs in."""
    folder = Path(module.__file__).resolve().parent
    if not (folder / f"{name}.py").is_file():
        folder = Path.cwd()
    return load_module(folder, name)
