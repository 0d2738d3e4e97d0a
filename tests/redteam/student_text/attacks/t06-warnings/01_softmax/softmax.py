"""Attack: warnings that quote the hidden input, at import and per call."""
import warnings

warnings.warn("ZZLEAK06 at import")


def softmax(x, dim=-1):
    warnings.warn(f"ZZLEAK06 {x.flatten()[:8].tolist()}", RuntimeWarning)
    warnings.warn(f"ZZLEAK06 {tuple(x.shape)}", UserWarning)
    return x * 0
