"""Attack: crash the interpreter with a segfault."""
import ctypes


def softmax(x, dim=-1):
    ctypes.string_at(0)
    return x
