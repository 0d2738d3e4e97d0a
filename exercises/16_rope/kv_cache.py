"""Exercise 14, reference solution: a KV cache and batched generation.

`gpt.py` (exercise 12) ships beside this file, with the modules it uses:
the functions below run its GPT's own layers, step by step, keeping every
layer's keys and values so that each new token costs one row of attention
instead of a whole recomputation.
"""
import math

import torch
from torch import nn

from gpt import GPT
from multihead import merge_heads, split_heads


class KVCache:
    """The keys and values of every layer for the positions seen so far.
    It never holds more than ``context_length`` positions: ``append`` raises
    ValueError instead of growing past it."""

    def __init__(self, num_layers: int, context_length: int) -> None:
        self.context_length = context_length
        self.keys: list[torch.Tensor | None] = [None] * num_layers    # each (b, h, t, head_dim)
        self.values: list[torch.Tensor | None] = [None] * num_layers

    def __len__(self) -> int:
        """The number of positions cached (in layer 0, the first to be appended to)."""
        return 0 if self.keys[0] is None else self.keys[0].size(-2)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' k, v (b, h, n, head_dim) to ``layer`` and
        return all of that layer's keys and values, (b, h, t + n, head_dim)."""
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        if k.size(-2) > self.context_length:
            raise ValueError(f"the cache would hold {k.size(-2)} positions, more than "
                             f"context_length={self.context_length}")
        self.keys[layer], self.values[layer] = k, v
        return k, v


def _attend_cached(attn: nn.Module, x: torch.Tensor, cache: KVCache, layer: int,
                   blocked: torch.Tensor) -> torch.Tensor:
    """The shipped MultiHeadAttention's computation for the new positions
    ``x`` (b, n, d), against the cached keys and values plus their own."""
    q = split_heads(attn.W_query(x), attn.num_heads)                      # (b, h, n, hd)
    k, v = cache.append(layer, split_heads(attn.W_key(x), attn.num_heads),
                        split_heads(attn.W_value(x), attn.num_heads))    # (b, h, t + n, hd)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)         # (b, h, n, t + n)
    scores = scores.masked_fill(blocked, float("-inf"))
    # A padding query before its prompt's first real token has every key
    # blocked: its row is NaN after the softmax. Make it zeros, or the NaN
    # reaches the next layer's values, and 0 * NaN is NaN even for real tokens.
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    weights = attn.dropout(weights)
    return attn.out_proj(merge_heads(weights @ v))                      # (b, n, d)


def forward_cached(model: GPT, idx: torch.Tensor, cache: KVCache,
                   pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The logits (b, n, vocab_size) of the new tokens idx (b, n), which come
    after the ``len(cache)`` positions already in ``cache``; appends their
    keys and values to it. ``pad_mask`` (b, len(cache) + n), True at padding,
    covers the cached and the new positions."""
    b, n = idx.shape
    start = len(cache)                    # read before layer 0 appends to the cache
    total = start + n
    if total > cache.context_length or total > model.context_length:
        raise ValueError(f"{start} cached and {n} new positions: more than context_length={cache.context_length}")
    # Query i sits at position start + i: it sees keys 0 .. start + i. The
    # rows of the square causal mask for 0 .. n-1 would hide the cache.
    blocked = torch.ones(n, total, dtype=torch.bool, device=idx.device).triu(start + 1)   # (n, t + n)
    if pad_mask is None:
        positions = torch.arange(start, total, device=idx.device)                        # (n,)
    else:
        # Each prompt's first real token is at position 0: count real tokens.
        positions = ((~pad_mask).long().cumsum(-1) - 1).clamp_min(0)[:, start:]        # (b, n)
        blocked = blocked | pad_mask[:, None, None, :]                                  # (b, 1, n, t + n)
    x = model.drop(model.tok_emb(idx) + model.pos_emb(positions))                       # (b, n, d)
    for layer, block in enumerate(model.blocks):
        x = x + block.drop(_attend_cached(block.attn, block.norm1(x), cache, layer, blocked))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))                                              # (b, n, vocab)


@torch.no_grad()
def generate_cached(model: GPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a cache: idx (b, n) -> (b, n + max_new_tokens),
    the same tokens as recomputing model(idx[:, -context_length:]) at every step."""
    model.eval()                         # generation is eval mode, whoever calls (as 13's generate)
    context = model.context_length
    cache = KVCache(len(model.blocks), context)
    logits = forward_cached(model, idx[:, -context:], cache)             # prefill
    for step in range(max_new_tokens):
        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)             # (b, 1)
        idx = torch.cat([idx, next_id], dim=1)
        if step == max_new_tokens - 1:
            break
        if len(cache) == context:
            # Full. Learned positions cannot slide (every cached key holds
            # its position), so start over from the last context_length tokens.
            cache = KVCache(len(model.blocks), context)
            logits = forward_cached(model, idx[:, -context:], cache)
        else:
            logits = forward_cached(model, next_id, cache)
    return idx


@torch.no_grad()
def generate_batch(model: GPT, prompts: list[torch.Tensor], max_new_tokens: int, pad_id: int) -> list[torch.Tensor]:
    """Greedy decoding of prompts of different lengths in one batch, left
    padded with ``pad_id``: each prompt (1-D) followed by its new tokens,
    the same as generating it alone. Raises ValueError when the longest
    prompt plus max_new_tokens exceeds context_length."""
    model.eval()
    longest = max(len(p) for p in prompts)
    if longest + max_new_tokens > model.context_length:
        raise ValueError(f"{longest} + {max_new_tokens} tokens: more than context_length={model.context_length}")
    device = prompts[0].device
    idx = torch.full((len(prompts), longest), pad_id, dtype=torch.long, device=device)
    pad_mask = torch.ones(len(prompts), longest, dtype=torch.bool, device=device)
    for row, prompt in enumerate(prompts):
        idx[row, longest - len(prompt):] = prompt          # left padding: every last token in the last column
        pad_mask[row, longest - len(prompt):] = False
    cache = KVCache(len(model.blocks), model.context_length)
    logits = forward_cached(model, idx, cache, pad_mask)
    new = []
    for step in range(max_new_tokens):
        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)  # (b, 1)
        new.append(next_id)
        if step == max_new_tokens - 1:
            break
        pad_mask = torch.cat([pad_mask, torch.zeros_like(pad_mask[:, :1])], dim=1)
        logits = forward_cached(model, next_id, cache, pad_mask)
    generated = torch.cat(new, dim=1) if new else idx.new_zeros(len(prompts), 0)
    return [torch.cat([prompt, generated[row]]) for row, prompt in enumerate(prompts)]
