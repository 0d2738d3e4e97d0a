"""Attack: return an object of a class whose name carries text; the wire
refuses it, and its refusal names the class."""


def softmax(x, dim=-1):
    return type("ZZLEAK13_" + str(int(abs(x.flatten()[0]) * 1e6)), (), {})()
