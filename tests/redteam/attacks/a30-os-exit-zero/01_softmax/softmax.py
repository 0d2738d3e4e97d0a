"""Attack: leave with os._exit(0), skipping every handler."""
import os

os._exit(0)


def softmax(x, dim=-1):
    return x
