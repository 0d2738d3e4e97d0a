"""Attack: unbounded recursion with the recursion limit lifted (C stack overflow)."""
import sys

sys.setrecursionlimit(10**8)


def _down(n):
    return _down(n + 1) + 1


def softmax(x, dim=-1):
    _down(0)
    return x
