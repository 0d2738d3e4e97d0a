"""Attack: the text in a chained cause and in __notes__, the outer error a builtin."""


def softmax(x, dim=-1):
    try:
        raise KeyError(f"ZZLEAK14 {x.flatten()[:4].tolist()}")
    except KeyError as inner:
        outer = RuntimeError("ZZLEAK14 outer")
        outer.add_note(f"ZZLEAK14 note {tuple(x.shape)}")
        raise outer from inner
