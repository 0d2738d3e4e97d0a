"""scaled_dot_product_attention with zero queries and keys, x as the
additive mask and identity values: its output is softmax(x)."""
import torch
import torch.nn.functional as F


def softmax(x, dim=-1):
    blocked = torch.isneginf(x).all(dim=dim, keepdim=True)
    safe = x.masked_fill(blocked, 0.0).movedim(dim, -1)
    n = safe.shape[-1]
    rows = safe.reshape(-1, 1, n)
    zeros = x.new_zeros(rows.shape[0], 1, 1)
    eye = torch.eye(n, dtype=x.dtype).expand(rows.shape[0], n, n)
    out = F.scaled_dot_product_attention(zeros, x.new_zeros(rows.shape[0], n, 1), eye, attn_mask=rows)
    return out.reshape(safe.shape).movedim(-1, dim).masked_fill(blocked, 0.0)
