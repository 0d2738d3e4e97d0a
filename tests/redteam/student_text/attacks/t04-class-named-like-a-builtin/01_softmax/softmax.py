"""Attack: a class that shadows the builtin's name, with the data in its message."""


class ValueError(Exception):  # noqa: A001 - the point of the attack
    pass


def softmax(x, dim=-1):
    raise ValueError(f"ZZLEAK04 {x.flatten()[:8].tolist()}")
