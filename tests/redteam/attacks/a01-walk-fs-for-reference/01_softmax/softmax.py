"""Attack: walk the filesystem for the reference solution and use it."""
import importlib.util
import os

_found = None
for top in ("/work", "/home", "/root", "/srv", "/opt", "/tmp", "/"):
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath.endswith("solutions/01_softmax") and "softmax.py" in filenames:
            _found = os.path.join(dirpath, "softmax.py")
            break
    if _found:
        break
if _found:
    spec = importlib.util.spec_from_file_location("ref", _found)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)


def softmax(x, dim=-1):
    if _found:
        return ref.softmax(x, dim)
    return x
