"""Attack: find the hidden checks' source through the grader package and replay their reference."""
import importlib.util
import os

_ns = {}
try:
    spec = importlib.util.find_spec("grader")
    base = os.path.dirname(os.path.dirname(spec.origin))
    exec(open(os.path.join(base, "solutions", "01_softmax", "softmax.py")).read(), _ns)
except Exception:
    pass


def softmax(x, dim=-1):
    return _ns["softmax"](x, dim) if "softmax" in _ns else x
