"""An attack on 18-cache-cost (a red-team pass), appended to 18's reference by
tests/test_cached_steps_work.py: no K/V cache; each step recomputes the last
receptive_field tokens, which is exact in a model with no positions."""
import torch


# ---- red-team: no K/V cache. Keep the last receptive_field token ids and
# recompute windowed_forward over them every step (no positions in a NoPE GPT).
def forward_cached(model, idx, cache):  # noqa: F811
    b, n = idx.shape
    prev = getattr(cache, "_toks", None)
    toks = idx if prev is None else torch.cat([prev, idx], dim=1)
    rf = receptive_field(len(model.blocks), cache.window)
    ctx = toks[:, -(rf + n - 1):]
    out = windowed_forward(model, ctx, cache.window)[:, -n:]
    cache._toks = toks[:, -(rf + 64):]
    total = cache._seen[0] + n
    for i in range(len(cache.keys)):
        cache.keys[i] = torch.empty(b, 1, min(total, cache.window), 0); cache.values[i] = cache.keys[i]
    cache._seen = [total] * len(cache._seen)
    return out
