"""Attack: no softmax; a module-level __getattr__ answers every missing name
with an AttributeError that reads like Python's "no such name" message, the
"name" being text the module chose."""


def __getattr__(name):
    raise AttributeError(f"module 'softmax' has no attribute 'ZZLEAK09_{name}'")
