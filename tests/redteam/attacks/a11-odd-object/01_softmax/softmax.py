"""Attack: return an object that equals everything and looks like a tensor."""


class Anything:
    shape = property(lambda self: self._x.shape)
    dtype = property(lambda self: self._x.dtype)

    def __init__(self, x):
        self._x = x

    def __eq__(self, other):
        return True

    def __bool__(self):
        return True

    def __float__(self):
        return 1.0

    def __getattr__(self, name):
        return lambda *a, **k: True


def softmax(x, dim=-1):
    return Anything(x)
