"""Public words for the kind of input a hidden call is ("unbatched (n_q, d_k)
queries, a (1, n_k) mask that broadcasts"): shown beside a student's own
exception (grader/own_errors.py). Sizes are roles, never values: what a
check draws is said, not what it drew."""
from __future__ import annotations

import torch

from grader.checks import Text, text
from grader.checks.forbidden import unwrapped
from grader.sandbox import ProbeCall


def _mask_words(mask: torch.Tensor, lead: int) -> tuple[str, str]:
    """The mask's shape by role, and whether it broadcasts."""
    rank = mask.dim()
    roles = ["b"] * max(rank - 2, 0) + (["n_q", "n_k"] if rank >= 2 else ["n_k"])
    shape = tuple(mask.shape)
    named = [("1" if size == 1 and role != "n_k" else role) for role, size in zip(roles, shape)]
    broadcasts = rank < lead + 2 or "1" in named
    return f"({', '.join(named)})", ("a " if broadcasts else "a full-size ")


def attention_inputs(call: ProbeCall) -> Text | None:
    """Queries, keys and mask of an attention call, by role; None for other calls."""
    kwargs = unwrapped(call).kwargs
    query, key, mask = kwargs.get("query"), kwargs.get("key"), kwargs.get("mask")
    if type(query) is not torch.Tensor or type(key) is not torch.Tensor or query.dim() < 2:
        return None
    lead = query.dim() - 2
    en = (f"unbatched (n_q, d_k) queries" if lead == 0
          else f"queries with {lead} batch/head dimension{'s' if lead > 1 else ''} (..., n_q, d_k)")
    zh = "无批维的 (n_q, d_k) 查询" if lead == 0 else f"带 {lead} 个批/头维度的查询 (..., n_q, d_k)"
    if key.dim() >= 2 and key.shape[-2] != query.shape[-2]:
        en, zh = en + ", more keys than queries or fewer (n_k != n_q)", zh + "，键与查询的个数不同（n_k != n_q）"
    if type(mask) is torch.Tensor:
        shape, article = _mask_words(mask, lead)
        if article == "a ":
            en, zh = en + f", a {shape} mask that broadcasts to the scores", zh + f"，可广播到分数形状的 {shape} 掩码"
        else:
            en, zh = en + f", a full-size {shape} mask", zh + f"，完整形状的 {shape} 掩码"
    elif "mask" in kwargs:
        en, zh = en + ", no mask", zh + "，无掩码"
    return text(en, zh)
