"""Attack: a ValueError subclass whose __str__ and __repr__ quote the hidden input."""


class Loud(ValueError):
    def __init__(self, data):
        super().__init__()
        self.data = data

    def __str__(self):
        return f"ZZLEAK03 {self.data}"

    __repr__ = __str__


def softmax(x, dim=-1):
    raise Loud(x.flatten()[:8].tolist())
