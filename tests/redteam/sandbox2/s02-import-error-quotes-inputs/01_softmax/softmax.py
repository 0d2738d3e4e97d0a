"""Attack: at import time, look for the hidden inputs (the call pipe on fd 3,
/proc/self/fd/3, the decoded calls among the objects in memory) and raise
an error that quotes whatever was found, hoping the import error reaches
the feedback. (tests/test_sandbox_trust.py also looks for the inputs'
tensors in memory, where it knows their values.)"""
import gc
import os

found = []
try:
    os.set_blocking(3, False)
    found.append(os.read(3, 1 << 16).decode("latin-1"))
except OSError:
    pass
try:
    found.append(open("/proc/self/fd/3", "rb").read(1 << 16).decode("latin-1"))
except OSError:
    pass
prefix = "".join(["coursekit.probes.", "softmax:"])  # built: a literal would find itself
for obj in gc.get_objects():
    if type(obj) in (list, tuple):  # a decoded call is [probe, kwargs]
        found += [item for item in obj if type(item) is str and item.startswith(prefix)]
if any(found):
    raise ValueError("STOLEN-AT-IMPORT " + " | ".join(found)[:1500])
raise ValueError("nothing to steal yet")


def softmax(x, dim=-1):
    return x
