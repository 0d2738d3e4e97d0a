"""Attack: find an already imported reference or hidden check in sys.modules."""
import sys


def _steal():
    for name, mod in list(sys.modules.items()):
        # torch._refs.softmax is torch's own softmax, not the grader's reference.
        if mod is None or name == __name__ or name.startswith("torch"):
            continue
        fn = getattr(mod, "softmax", None)
        if callable(fn) and ("solution" in name or "check" in name or "ref" in name):
            return fn
    return None


def softmax(x, dim=-1):
    fn = _steal()
    return fn(x, dim) if fn else x
