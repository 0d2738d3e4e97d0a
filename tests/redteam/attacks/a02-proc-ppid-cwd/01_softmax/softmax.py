"""Attack: read the reference through the parent's working directory."""
import os

_ns = {}
for pid in (os.getppid(), 1):
    for rel in ("solutions/01_softmax/softmax.py", "../solutions/01_softmax/softmax.py"):
        try:
            with open(f"/proc/{pid}/cwd/{rel}") as fh:
                exec(fh.read(), _ns)
        except Exception:
            pass


def softmax(x, dim=-1):
    if "softmax" in _ns:
        return _ns["softmax"](x, dim)
    return x
