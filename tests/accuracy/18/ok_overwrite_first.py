#: expect: full
#: about: Mistral's shortcut for one new token (overwrite the oldest slot first, then attend to every held slot without a mask); chunks through positions kept per slot in a tensor; an additive -inf mask; seen the first layer's count, a plain list per layer; a hand-written safe softmax
"""A submission of exercise 18: the single-token shortcut, positions stored per slot."""
import math

import torch

from gpt import GPT
from multihead import merge_heads, split_heads


def _blocked(q_pos, k_pos, window):
    diff = q_pos[:, None] - k_pos[None, :]
    return (diff < 0) | (diff >= window)


def sliding_window_mask(n_query, n_key, window, offset=0):
    if window < 1:
        raise ValueError("window must be >= 1")
    return _blocked(torch.arange(n_query) + offset, torch.arange(n_key), window)


def _softmax(scores):
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-300)


def _attend(attn, q, k, v, blocked):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(attn.head_dim)
    if blocked is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(blocked, float("-inf"))
    weights = attn.dropout(_softmax(scores))
    return attn.out_proj(merge_heads(torch.einsum("bhqk,bhkd->bhqd", weights, v)))


def sliding_window_attention(attn, x, window, pad_mask=None):
    heads = attn.num_heads
    q, k, v = (split_heads(w(x), heads) for w in (attn.W_query, attn.W_key, attn.W_value))
    blocked = sliding_window_mask(x.size(1), x.size(1), window).to(x.device)
    if pad_mask is not None:
        blocked = blocked[None, None] | pad_mask[:, None, None, :]
    return _attend(attn, q, k, v, blocked)


def windowed_forward(model, idx, window, pad_mask=None):
    x = model.drop(model.tok_emb(idx))
    for block in model.blocks:
        x = x + block.drop(sliding_window_attention(block.attn, block.norm1(x), window, pad_mask))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


class RollingKVCache:
    def __init__(self, num_layers, window):
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.keys = [None] * num_layers
        self.values = [None] * num_layers
        self.slot_positions = [None] * num_layers
        self.counts = [0] * num_layers

    @property
    def seen(self):
        return self.counts[0]

    def __len__(self):
        return 0 if self.keys[0] is None else self.keys[0].shape[2]

    def append(self, layer, k, v):
        n, start = k.shape[2], self.counts[layer]
        self.counts[layer] = start + n
        new_pos = torch.arange(start, start + n, device=k.device)
        if self.keys[layer] is None:
            old_k, old_v, old_pos = k[:, :, :0], v[:, :, :0], new_pos[:0]
        else:
            old_k, old_v, old_pos = self.keys[layer], self.values[layer], self.slot_positions[layer]
        keys, values, positions = torch.cat([old_k, k], 2), torch.cat([old_v, v], 2), torch.cat([old_pos, new_pos])
        if old_k.shape[2] < self.window:               # still filling up: grow in time order
            ring_k, ring_v, ring_pos = keys, values, positions
        else:
            ring_k, ring_v, ring_pos = old_k.clone(), old_v.clone(), old_pos.clone()
        if ring_k.shape[2] > self.window:               # grew past the window: lay out the last ones by p % window
            last = positions[-self.window:]
            order = torch.argsort(last % self.window)
            ring_k, ring_v, ring_pos = keys[:, :, -self.window:][:, :, order], values[:, :, -self.window:][:, :, order], last[order]
        elif old_k.shape[2] == self.window:             # full: overwrite slots in place
            for i in range(max(0, n - self.window), n):
                slot = int(new_pos[i]) % self.window
                ring_k[:, :, slot], ring_v[:, :, slot], ring_pos[slot] = k[:, :, i], v[:, :, i], new_pos[i]
        self.keys[layer], self.values[layer], self.slot_positions[layer] = ring_k, ring_v, ring_pos
        return keys, values, positions


def forward_cached(model, idx, cache):
    n = idx.shape[1]
    start = cache.seen
    q_pos = torch.arange(start, start + n, device=idx.device)
    x = model.drop(model.tok_emb(idx))
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        q = split_heads(attn.W_query(h), attn.num_heads)
        k = split_heads(attn.W_key(h), attn.num_heads)
        v = split_heads(attn.W_value(h), attn.num_heads)
        keys, values, positions = cache.append(layer, k, v)
        if n == 1 and cache.keys[layer].shape[2] == cache.window and start >= cache.window:
            # One token, full ring: after the overwrite the ring is exactly its window.
            out = _attend(attn, q, cache.keys[layer], cache.values[layer], None)
        else:
            out = _attend(attn, q, keys, values, _blocked(q_pos, positions, cache.window))
        x = x + block.drop(out)
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


def receptive_field(num_layers, window):
    if num_layers < 0 or window < 1:
        raise ValueError("need num_layers >= 0 and window >= 1")
    return 1 + num_layers * (window - 1)
