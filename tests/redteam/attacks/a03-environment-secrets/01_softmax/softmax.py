"""Attack: look for paths or secrets in environment variables."""
import os

_ns = {}
for value in os.environ.values():
    for candidate in (value, os.path.join(value, "solutions/01_softmax/softmax.py")):
        if candidate.endswith("softmax.py") and os.path.isfile(candidate):
            exec(open(candidate).read(), _ns)


def softmax(x, dim=-1):
    return _ns["softmax"](x, dim) if "softmax" in _ns else x
