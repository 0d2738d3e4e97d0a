"""A submission written as an attack on 16-cache-cost (tests/test_cached_steps_work.py): exercise 16's reference, rotary position embeddings (RoPE), with the attack appended at its end.

`multihead.py` (exercise 06), `gpt.py` (exercise 12) and `kv_cache.py`
(exercise 14) ship beside this file. RoPE replaces the learned position
table: each query and key vector is cut into pairs of coordinates
(2k, 2k+1), and pair k is rotated by the angle position * theta_k, with
theta_k = base^(-2k / head_dim). The dot product of a query rotated by
position i with a key rotated by position j then depends on i - j only.
"""
import math

import torch
from torch import nn

from gpt import GPTBlock
from kv_cache import KVCache
from multihead import MultiHeadAttention, merge_heads, split_heads


def _inverse_frequencies(head_dim: int, base: float, dtype: torch.dtype, device=None) -> torch.Tensor:
    """theta_k = base^(-2k / head_dim) for k = 0 .. head_dim/2 - 1."""
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE rotates pairs of coordinates: head_dim={head_dim} must be even")
    exponents = torch.arange(0, head_dim, 2, dtype=dtype, device=device) / head_dim   # 2k / head_dim
    return base ** -exponents                                                       # (head_dim/2,)


def rope_angles(context_length: int, head_dim: int, base: float = 10000.0,
                dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position * theta_k, each (context_length, head_dim // 2):
    row p is position p, column k is pair k. Raises ValueError for an odd head_dim."""
    dtype = dtype or torch.get_default_dtype()
    theta = _inverse_frequencies(head_dim, base, dtype)
    angles = torch.arange(context_length, dtype=dtype)[:, None] * theta[None, :]    # (context_length, head_dim/2)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (b, h, n, head_dim) rotated pair by pair: pair k = (x[..., 2k], x[..., 2k+1])
    of the token at position p turns by p * theta_k. positions: (n,), one per
    token, or (b, n), one row per sequence (the same for every head). Returns
    a new tensor; raises ValueError for an odd head_dim."""
    theta = _inverse_frequencies(x.size(-1), base, x.dtype, x.device)
    # In x's dtype: a float64 input gets float64 angles, not float32's rounding.
    angles = positions.to(x.dtype)[..., None] * theta      # (n, hd/2) or (b, n, hd/2)
    if angles.dim() == 3:
        angles = angles[:, None]                           # (b, 1, n, hd/2): the same for every head
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]                 # (b, h, n, hd/2) each
    # The 2x2 rotation [[cos, -sin], [sin, cos]] applied to (even, odd).
    rotated_even = even * cos - odd * sin
    rotated_odd = even * sin + odd * cos
    # Interleave back: (..., hd/2, 2) -> (..., hd), pair k at columns 2k, 2k+1.
    return torch.stack([rotated_even, rotated_odd], dim=-1).flatten(-2)


def _attend(attn: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
    """06's attention from here on: scores, mask, softmax, dropout, heads merged, out_proj."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)                 # (b, h, n, t)
    scores = scores.masked_fill(blocked, float("-inf"))
    # A padding query before its prompt's first real token has every key
    # blocked: its row is NaN after the softmax. Make it zeros, or the NaN
    # reaches the next layer's values, and 0 * NaN is NaN even for real tokens.
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    weights = attn.dropout(weights)
    return attn.out_proj(merge_heads(weights @ v))                             # (b, n, d_out)


class RoPEMultiHeadAttention(MultiHeadAttention):
    """06's causal MultiHeadAttention (the same parameters and mask), with
    the queries and keys rotated by their positions. The values are not."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        if self.head_dim % 2 != 0:
            raise ValueError(f"RoPE rotates pairs of coordinates: head_dim={self.head_dim} must be even")

    def project(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (b, n, d_in) -> q, k rotated by ``positions``, v as it is: each (b, h, n, head_dim)."""
        # Split first: RoPE rotates within one head, with head_dim's frequencies.
        q = apply_rope(split_heads(self.W_query(x), self.num_heads), positions)
        k = apply_rope(split_heads(self.W_key(x), self.num_heads), positions)
        v = split_heads(self.W_value(x), self.num_heads)   # values carry content, not position
        return q, k, v

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n, d_in), n <= context_length; positions (n,) or (b, n), by
        default 0 .. n-1 -> (b, n, d_out)."""
        n = x.size(1)
        if n > self.context_length:
            raise ValueError(f"input has {n} tokens, more than context_length={self.context_length}")
        if positions is None:
            positions = torch.arange(n, device=x.device)
        q, k, v = self.project(x, positions)
        return _attend(self, q, k, v, self.mask[:n, :n])


class RoPEGPTBlock(GPTBlock):
    """12's pre-norm GPTBlock with RoPEMultiHeadAttention."""

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False) -> None:
        super().__init__(d_model, num_heads, context_length, dropout, qkv_bias)
        self.attn = RoPEMultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x (b, n, d_model) -> (b, n, d_model)."""
        x = x + self.drop(self.attn(self.norm1(x), positions))
        x = x + self.drop(self.ff(self.norm2(x)))
        return x


class RoPEGPT(nn.Module):
    """12's GPT without ``pos_emb``: the positions enter every attention
    layer through RoPE instead of being added to the embeddings once."""

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int,
                 dropout: float = 0.0, qkv_bias: bool = False, tie_weights: bool = True) -> None:
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            RoPEGPTBlock(d_model, num_heads, context_length, dropout, qkv_bias) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight
        nn.init.normal_(self.tok_emb.weight, mean=0.0, std=0.02)
        if not tie_weights:
            nn.init.normal_(self.head.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (b, n) token ids, n <= context_length -> logits (b, n, vocab_size)."""
        n = idx.size(1)
        if n > self.context_length:
            raise ValueError(f"input has {n} tokens, more than context_length={self.context_length}")
        positions = torch.arange(n, device=idx.device)
        x = self.drop(self.tok_emb(idx))                    # no position added here
        for block in self.blocks:
            x = block(x, positions)
        return self.head(self.final_norm(x))


def forward_cached(model: RoPEGPT, idx: torch.Tensor, cache: KVCache,
                   pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """14's forward_cached for a RoPEGPT: the logits (b, n, vocab_size) of the
    new tokens idx (b, n), which come after the len(cache) cached positions;
    their rotated keys and their values are appended to ``cache``.
    ``pad_mask`` (b, len(cache) + n), True at padding, covers the cached and
    the new positions."""
    b, n = idx.shape
    start = len(cache)                    # read before layer 0 appends to the cache
    total = start + n
    if total > cache.context_length or total > model.context_length:
        raise ValueError(f"{start} cached and {n} new positions: more than context_length={cache.context_length}")
    blocked = torch.ones(n, total, dtype=torch.bool, device=idx.device).triu(start + 1)   # (n, t + n)
    if pad_mask is None:
        positions = torch.arange(start, total, device=idx.device)                        # (n,)
    else:
        # Each prompt's first real token is at position 0: count real tokens.
        positions = ((~pad_mask).long().cumsum(-1) - 1).clamp_min(0)[:, start:]        # (b, n)
        blocked = blocked | pad_mask[:, None, None, :]                                  # (b, 1, n, t + n)
    x = model.drop(model.tok_emb(idx))
    for layer, block in enumerate(model.blocks):
        # The cache keeps keys already rotated by their own positions: a
        # cached key never moves again, only the new tokens are rotated.
        q, k, v = block.attn.project(block.norm1(x), positions)
        k, v = cache.append(layer, k, v)
        x = x + block.drop(_attend(block.attn, q, k, v, blocked))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


# ---- an attack (a red-team pass): no K/V cache at all. The "cache" holds only token ids; a step
# peeks at the future tokens through idx._base (the probe's slices are views)
# and runs ONE full forward over prefix + all future tokens, memoised.
_ref_forward_cached = forward_cached


def _set_len(cache, b, total):
    cache.keys[0] = torch.empty(b, 1, total, 0, dtype=torch.float64)


def forward_cached(model, idx, cache, pad_mask=None):  # noqa: F811
    if pad_mask is not None:
        return _ref_forward_cached(model, idx, cache, pad_mask)
    b, n = idx.shape
    prev = getattr(cache, "_toks", None)
    start = 0 if prev is None else prev.size(1)
    toks = idx if prev is None else torch.cat([prev, idx], dim=1)
    if toks.size(1) > cache.context_length:
        raise ValueError("too long")
    memo = getattr(cache, "_memo", None)
    if memo is not None and start + n <= memo[0].size(1) and torch.equal(memo[0][:, :start + n], toks):
        out = memo[1][:, start:start + n]
    else:
        future = idx
        if b == 1 and idx.stride(-1) == 1:
            total_elems = idx.untyped_storage().nbytes() // idx.element_size()
            L = min(total_elems - idx.storage_offset(), model.context_length - start)
            if L > n:
                future = idx.as_strided((1, L), (L, 1)).clamp(0, model.tok_emb.num_embeddings - 1)
        allt = (future if prev is None else torch.cat([prev, future], dim=1))[:, :model.context_length]
        logits = model(allt)
        cache._memo = (allt, logits)
        out = logits[:, start:start + n]
    cache._toks = toks
    _set_len(cache, b, toks.size(1))
    return out
