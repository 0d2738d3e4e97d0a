"""Attack: sleep past the wall-clock limit."""
import time


def softmax(x, dim=-1):
    time.sleep(10**6)
    return x
