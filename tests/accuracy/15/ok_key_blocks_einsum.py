#: expect: full
#: about: every query at once, only the keys in blocks (as the FlashAttention-1 paper's outer loop); einsum; an additive -inf mask built per block from positions; lse kept as the running quantity itself (log-space accumulation of the sum); a backward written with einsum
"""A submission of exercise 15: key blocks only, in log space."""
import math

import torch


def _mask(n_q, n_k, start, stop, causal, device, dtype):
    if not causal:
        return None
    rows = torch.arange(n_q, device=device)[:, None] + (n_k - n_q)
    cols = torch.arange(start, stop, device=device)[None, :]
    return torch.zeros((), dtype=dtype, device=device).expand(n_q, stop - start).masked_fill(cols > rows, -math.inf)


def tiled_attention(query, key, value, block_size=64, causal=False):
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = query.shape[-1] ** -0.5
    running_max = torch.full(query.shape[:-1], -math.inf, dtype=query.dtype, device=query.device)
    log_sum = torch.full(query.shape[:-1], -math.inf, dtype=query.dtype, device=query.device)
    acc = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
    for start in range(0, n_k, block_size):  # the last query may see every key block
        stop = min(start + block_size, n_k)
        s = torch.einsum("...qd,...kd->...qk", query, key[..., start:stop, :]) * scale
        bias = _mask(n_q, n_k, start, stop, causal, query.device, query.dtype)
        if bias is not None:
            s = s + bias
        new_max = torch.maximum(running_max, s.amax(-1))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        correction = torch.exp(running_max - safe)
        weights = torch.exp(s - safe[..., None])
        acc = acc * correction[..., None] + torch.einsum("...qk,...kd->...qd", weights, value[..., start:stop, :])
        log_sum = torch.logaddexp(log_sum, torch.logsumexp(s, dim=-1))
        running_max = new_max
    total = torch.exp(log_sum - torch.where(torch.isinf(running_max), torch.zeros_like(running_max), running_max))
    out = torch.where(torch.isinf(log_sum)[..., None], torch.zeros_like(acc), acc / total.clamp_min(1e-300)[..., None])
    return out, log_sum


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, block_size):
        out, lse = tiled_attention(q, k, v, block_size, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.block_size = causal, block_size
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        n_q, n_k = q.shape[-2], k.shape[-2]
        scale = q.shape[-1] ** -0.5
        d = (dout * out).sum(-1)
        lse_safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for start in range(0, n_k, ctx.block_size):
            stop = min(start + ctx.block_size, n_k)
            s = torch.einsum("...qd,...kd->...qk", q, k[..., start:stop, :]) * scale
            bias = _mask(n_q, n_k, start, stop, ctx.causal, q.device, q.dtype)
            if bias is not None:
                s = s + bias
            p = torch.exp(s - lse_safe[..., None])
            dv[..., start:stop, :] += torch.einsum("...qk,...qd->...kd", p, dout)
            dp = torch.einsum("...qd,...kd->...qk", dout, v[..., start:stop, :])
            ds = p * (dp - d[..., None]) * scale
            dq += torch.einsum("...qk,...kd->...qd", ds, k[..., start:stop, :])
            dk[..., start:stop, :] += torch.einsum("...qk,...qd->...kd", ds, q)
        return dq, dk, dv, None, None


def flash_attention(query, key, value, block_size=64, causal=False):
    return FlashAttention.apply(query, key, value, causal, block_size)
