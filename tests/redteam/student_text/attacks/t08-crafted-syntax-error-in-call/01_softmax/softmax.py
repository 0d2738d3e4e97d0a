"""Attack: raise SyntaxError from the function, quoting the input."""


def softmax(x, dim=-1):
    raise SyntaxError(f"ZZLEAK08 {x.flatten()[:8].tolist()}", ("softmax.py", 1, 1, "ZZLEAK08"))
