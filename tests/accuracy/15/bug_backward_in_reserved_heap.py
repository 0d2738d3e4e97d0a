#: expect: loses
#: fails: [15-memory-backward]
#: about: a backward through the whole (n, n) matrix that hides its peak in heap set aside and freed at import time (freed heap stays resident and is reused): the peak grows little, but it lies far above the reference's
"""A submission of exercise 15 that hides a full-matrix backward in heap reserved at import."""

from __future__ import annotations

import math

import torch


def _visible_keys(q_end: int, n_q: int, n_k: int, causal: bool) -> int:
    """How many keys (0..stop-1) the queries before ``q_end`` may see.

    Bottom-right alignment: query i sits at position i + n_k - n_q, so it
    sees keys j <= i + n_k - n_q. Key blocks starting at or after the last
    query's position + 1 are entirely above the diagonal: never visited."""
    if not causal:
        return n_k
    return max(0, min(n_k, q_end + n_k - n_q))


def _block_scores(q: torch.Tensor, k: torch.Tensor, q_start: int, k_start: int, n_q: int, n_k: int,
                  scale: float, causal: bool) -> torch.Tensor:
    """Q_i K_j^T * scale for one (query block, key block) pair, -inf above the diagonal."""
    scores = q @ k.transpose(-2, -1) * scale                      # (..., bq, bk)
    if causal and k_start + k.size(-2) - 1 > q_start + n_k - n_q:  # the block crosses the diagonal
        rows = torch.arange(q_start, q_start + q.size(-2), device=q.device)[:, None] + (n_k - n_q)
        cols = torch.arange(k_start, k_start + k.size(-2), device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    return scores


def tiled_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_size: int = 64,
                    causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d)) V, one block of keys at a time.

    query (..., n_q, d), key (..., n_k, d), value (..., n_k, d_v).
    Returns (output (..., n_q, d_v), lse (..., n_q)); a query that sees no
    key gets zeros and lse = -inf.
    """
    n_q, n_k, scale = query.size(-2), key.size(-2), 1.0 / math.sqrt(query.size(-1))
    output = query.new_zeros(*query.shape[:-1], value.size(-1))
    lse = query.new_full(query.shape[:-1], float("-inf"))
    for q_start in range(0, n_q, block_size):
        q = query[..., q_start:q_start + block_size, :]
        m = q.new_full((*q.shape[:-1], 1), float("-inf"))           # running max  (..., bq, 1)
        l = q.new_zeros((*q.shape[:-1], 1))                          # running sum  (..., bq, 1)
        acc = q.new_zeros((*q.shape[:-1], value.size(-1)))          # unnormalised output
        stop = _visible_keys(q_start + q.size(-2), n_q, n_k, causal)
        for k_start in range(0, stop, block_size):
            k = key[..., k_start:k_start + block_size, :]
            v = value[..., k_start:k_start + block_size, :]
            scores = _block_scores(q, k, q_start, k_start, n_q, n_k, scale, causal)
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            # A row that has seen only blocked keys so far keeps m = -inf:
            # shift it by 0 instead, so that exp(-inf - -inf) = NaN never happens.
            shift = m_new.masked_fill(torch.isneginf(m_new), 0.0)
            p = torch.exp(scores - shift)
            alpha = torch.exp(m - shift)                             # rescales what was summed under the old max
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + p @ v
            m = m_new
        output[..., q_start:q_start + q.size(-2), :] = acc / l.clamp_min(torch.finfo(l.dtype).tiny)
        lse[..., q_start:q_start + q.size(-2)] = (m + torch.log(l)).squeeze(-1)
    return output, lse


def _tiled_backward(query, key, value, output, lse, grad_output, block_size, causal):
    """The plain backward through the whole (n_q, n_k) matrix, its weights
    recomputed from the lse."""
    n_q, n_k, scale = query.size(-2), key.size(-2), 1.0 / math.sqrt(query.size(-1))
    shift = lse.masked_fill(torch.isneginf(lse), 0.0).unsqueeze(-1)
    p = torch.exp(_block_scores(query, key, 0, 0, n_q, n_k, scale, causal) - shift)
    grad_v = p.transpose(-2, -1) @ grad_output
    ds = p * (grad_output @ value.transpose(-2, -1) - (grad_output * output).sum(dim=-1, keepdim=True))
    return ds @ key * scale, ds.transpose(-2, -1) @ query * scale, grad_v


# Heap set aside at import and freed: it stays resident, and the (n, n)
# matrices of the backward reuse it without raising the peak.
_pin = []
for _ in range(3):
    _chunks = [torch.ones(1 << 18) for _ in range(64)]   # 64 chunks of 1 MiB, touched
    _pin.append(torch.ones(8))                           # keeps the heap's top from being trimmed
    del _chunks
class FlashAttention(torch.autograd.Function):
    """Tiled attention whose backward recomputes the weights block by block.

    ``FlashAttention.apply(query, key, value, causal, block_size)``: apply
    takes no keyword arguments. Returns the output only."""

    @staticmethod
    def forward(ctx, query, key, value, causal=False, block_size=64):
        output, lse = tiled_attention(query, key, value, block_size=block_size, causal=causal)
        ctx.save_for_backward(query, key, value, output, lse)   # O(n d), never (n_q, n_k)
        ctx.causal, ctx.block_size = causal, block_size
        return output

    @staticmethod
    def backward(ctx, grad_output):
        query, key, value, output, lse = ctx.saved_tensors
        grads = _tiled_backward(query, key, value, output, lse, grad_output, ctx.block_size, ctx.causal)
        return (*grads, None, None)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_size: int = 64,
                    causal: bool = False) -> torch.Tensor:
    """FlashAttention.apply with keywords: the output (..., n_q, d_v)."""
    return FlashAttention.apply(query, key, value, causal, block_size)
