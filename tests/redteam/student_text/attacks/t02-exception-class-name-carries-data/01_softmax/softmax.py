"""Attack: an exception class whose NAME is built from the hidden input."""


def softmax(x, dim=-1):
    digits = "_".join(str(int(abs(v) * 1000)) for v in x.flatten()[:4].tolist())
    raise type("ZZLEAK02_" + digits, (Exception,), {})()
