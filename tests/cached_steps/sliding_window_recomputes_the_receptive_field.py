"""A submission written as an attack on 18-cache-cost (tests/test_cached_steps_work.py): exercise 18's reference, sliding-window attention with a rolling cache, with the attack appended at its end.

`gpt.py` (exercise 12) ships beside this file, with the modules it uses.
The model here is its GPT without positions (NoPE: ``model.pos_emb`` is
None): nothing depends on a token's absolute position, so a window can
slide along a sequence of any length, far past ``context_length``. Each
query sees only the last ``window`` positions (itself included); a rolling
cache keeps exactly those positions' keys and values, in a ring buffer.
"""
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
    """The keys and values of the last ``window`` positions of every layer,
    in a ring buffer: position p lives in slot p % window, so a new
    position overwrites the oldest one and nothing ever moves."""

    def __init__(self, num_layers: int, window: int) -> None:
        if window < 1:
            raise ValueError(f"window={window}: the cache must hold at least one position")
        self.window = window
        self._slots = window                                            # the ring's size
        self.keys: list[torch.Tensor | None] = [None] * num_layers      # each (b, h, min(seen, window), hd)
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self._seen = [0] * num_layers                                   # positions appended, per layer

    def __len__(self) -> int:
        """The number of positions held (in layer 0): never more than ``window``."""
        return 0 if self.keys[0] is None else self.keys[0].size(-2)

    @property
    def seen(self) -> int:
        """The number of positions appended so far (in layer 0): the next token's position."""
        return self._seen[0]

    def _slot_positions(self, seen: int, device: torch.device) -> torch.Tensor:
        """The position each slot holds after ``seen`` positions: slot s,
        the latest p < seen with p % slots == s (arithmetic only: no
        data-dependent shape, so it runs on any device)."""
        slots = torch.arange(min(seen, self._slots), device=device)
        return slots + self._slots * ((seen - 1 - slots) // self._slots)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """k, v (b, h, n, hd) of the next n positions of ``layer``. Returns
        what those queries attend to: the held keys and values (slot order)
        followed by the new ones, (b, h, held + n, hd), and the position of
        each, (held + n,). Then keeps only the last ``window`` positions."""
        seen, n = self._seen[layer], k.size(-2)
        held = 0 if self.keys[layer] is None else self.keys[layer].size(-2)
        positions = torch.cat([self._slot_positions(seen, k.device),
                               torch.arange(seen, seen + n, device=k.device)])
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        # Each slot keeps the latest position it can hold: a new one, found
        # at held + (p - seen), or else the one the slot already held. A
        # chunk longer than the window keeps only its own last positions.
        kept = self._slot_positions(seen + n, k.device)
        index = torch.where(kept >= seen, held + kept - seen, torch.arange(kept.numel(), device=k.device))
        self.keys[layer], self.values[layer] = k.index_select(-2, index), v.index_select(-2, index)
        self._seen[layer] = seen + n
        return k, v, positions


def forward_cached(model: GPT, idx: torch.Tensor, cache: RollingKVCache) -> torch.Tensor:
    """The logits (b, n, vocab) of the new tokens idx (b, n), at positions
    cache.seen .. cache.seen + n - 1, each attending to the last
    cache.window positions; exactly windowed_forward(model, all tokens so
    far, cache.window) at these positions, however long the sequence."""
    n = idx.size(1)
    start = cache.seen                    # read before layer 0 appends
    query_positions = torch.arange(start, start + n, device=idx.device)
    x = model.drop(model.tok_emb(idx))
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        q = split_heads(attn.W_query(h), attn.num_heads)
        keys, values, key_positions = cache.append(layer, split_heads(attn.W_key(h), attn.num_heads),
                                                   split_heads(attn.W_value(h), attn.num_heads))
        # The ring's slots are not in time order once it has wrapped: the
        # mask comes from the positions the keys really hold.
        blocked = _outside_window(query_positions, key_positions, cache.window)
        x = x + block.drop(_attend(attn, q, keys, values, blocked))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


def receptive_field(num_layers: int, window: int) -> int:
    """How many positions (the last token's own included) can reach the
    last token through ``num_layers`` windowed layers: each layer reaches
    window - 1 positions further back."""
    if num_layers < 0 or window < 1:
        raise ValueError(f"num_layers={num_layers}, window={window}: need num_layers >= 0 and window >= 1")
    return num_layers * (window - 1) + 1


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
