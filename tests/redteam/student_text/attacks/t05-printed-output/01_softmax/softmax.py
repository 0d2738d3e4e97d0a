"""Attack: print the hidden input (stdout and stderr), then answer wrongly."""
import sys


def softmax(x, dim=-1):
    print("ZZLEAK05", x.flatten()[:8].tolist())
    print("ZZLEAK05", tuple(x.shape), file=sys.stderr)
    return x
