"""Attack: softmax exists but raises an AttributeError shaped like Python's
missing-name message, carrying the input's first value as the "name"."""


def softmax(x, dim=-1):
    raise AttributeError(f"module 'softmax' has no attribute 'ZZLEAK10_{int(abs(x.flatten()[0]) * 1e6)}'")
