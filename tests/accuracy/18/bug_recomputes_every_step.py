#: expect: loses
#: fails: [18-cache-cost, 18-ring]
#: about: forward_cached keeps the token ids and recomputes windowed_forward over all of them at every step: right logits, no saving (and no ring)
"""A submission of exercise 18: a cache of token ids, recomputed at every step."""
import math

import torch
from torch import nn

from gpt import GPT
from multihead import merge_heads, split_heads


def _outside_window(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int) -> torch.Tensor:
    """(n_q, n_k) True where key position j is outside query position p's
    window [p - window + 1, p]: in the future, or too far in the past."""
    q = query_positions[:, None]
    k = key_positions[None, :]
    return (k > q) | (k <= q - window)


def sliding_window_mask(n_query: int, n_key: int, window: int, offset: int = 0) -> torch.Tensor:
    """(n_query, n_key) bool, True = blocked. Query i sits at position
    offset + i, key j at position j; query i sees keys offset+i-window+1 ..
    offset+i (causal and windowed at once)."""
    if window < 1:
        raise ValueError(f"window={window}: a query must at least see itself (window >= 1)")
    return _outside_window(torch.arange(offset, offset + n_query), torch.arange(n_key), window)


def _attend(attn: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            blocked: torch.Tensor) -> torch.Tensor:
    """The shipped MultiHeadAttention's computation on q (b, h, n, hd)
    against k, v (b, h, t, hd) with ``blocked`` (broadcast to (b, h, n, t))."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)           # (b, h, n, t)
    scores = scores.masked_fill(blocked, float("-inf"))
    # A left-padding query whose whole window is padding has every key
    # blocked: zeros, not NaN (the NaN would reach every later layer).
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    weights = attn.dropout(weights)
    return attn.out_proj(merge_heads(weights @ v))                        # (b, n, d)


def sliding_window_attention(attn: nn.Module, x: torch.Tensor, window: int,
                             pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The shipped MultiHeadAttention ``attn`` restricted to a window: x
    (b, n, d_in), any n -> (b, n, d_out). ``pad_mask`` (b, n), True at
    padding: padding keys are blocked for every query too."""
    n = x.size(1)
    q = split_heads(attn.W_query(x), attn.num_heads)                      # (b, h, n, hd)
    k = split_heads(attn.W_key(x), attn.num_heads)
    v = split_heads(attn.W_value(x), attn.num_heads)
    blocked = sliding_window_mask(n, n, window).to(x.device)              # (n, n)
    if pad_mask is not None:
        blocked = blocked | pad_mask[:, None, None, :]                    # (b, 1, n, n)
    return _attend(attn, q, k, v, blocked)


def windowed_forward(model: GPT, idx: torch.Tensor, window: int,
                     pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The logits (b, n, vocab_size) of the NoPE GPT ``model`` with every
    block's attention restricted to ``window``: no positions are added, so
    n may exceed model.context_length. The recomputation a cache must equal."""
    x = model.drop(model.tok_emb(idx))                                    # NoPE: token embeddings only
    for block in model.blocks:
        x = x + block.drop(sliding_window_attention(block.attn, block.norm1(x), window, pad_mask))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


class RollingKVCache:
    def __init__(self, num_layers: int, window: int) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.num_layers = num_layers
        self.tokens = None                 # every token so far: recomputed at each step
        self.keys = [None] * num_layers
        self.values = [None] * num_layers

    def __len__(self) -> int:
        return 0 if self.tokens is None else min(self.tokens.size(1), self.window)

    @property
    def seen(self) -> int:
        return 0 if self.tokens is None else self.tokens.size(1)

    def append(self, layer, k, v):
        raise NotImplementedError("not used: forward_cached recomputes")


def forward_cached(model: GPT, idx: torch.Tensor, cache: RollingKVCache) -> torch.Tensor:
    n = idx.size(1)
    cache.tokens = idx if cache.tokens is None else torch.cat([cache.tokens, idx], dim=1)
    return windowed_forward(model, cache.tokens, cache.window)[:, -n:]


def receptive_field(num_layers: int, window: int) -> int:
    """How many positions (the last token's own included) can reach the
    last token through ``num_layers`` windowed layers: each layer reaches
    window - 1 positions further back."""
    if num_layers < 0 or window < 1:
        raise ValueError(f"num_layers={num_layers}, window={window}: need num_layers >= 0 and window >= 1")
    return num_layers * (window - 1) + 1
