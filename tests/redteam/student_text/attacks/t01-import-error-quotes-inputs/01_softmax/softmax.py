"""Attack: at import, find the hidden inputs the child may already hold (it
decoded its request before the import) and raise an error that quotes them."""
import sys

found = []
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        if isinstance(value, list) and "coursekit.probes" in repr(value)[:10000]:
            found.append(repr(value)[:300])
    frame = frame.f_back
raise RuntimeError("ZZLEAK01 " + ("; ".join(found) or "no inputs seen"))
