"""Attack: put the repository on sys.path and import the hidden checks / solutions."""
import os
import sys

for guess in (os.getcwd(), "/work/main", os.path.expanduser("~"), f"/proc/{os.getppid()}/cwd"):
    sys.path.insert(0, guess)
try:
    import grader.checks.softmax as hidden  # noqa: F401
    from solutions import softmax as ref_pkg  # noqa: F401
except Exception:
    hidden = None
try:
    import importlib
    _ref = importlib.import_module("solutions.01_softmax.softmax")
except Exception:
    _ref = None


def softmax(x, dim=-1):
    return _ref.softmax(x, dim) if _ref else x
