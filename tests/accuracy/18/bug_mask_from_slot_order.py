#: expect: loses
#: fails: [18-steps]
#: hint: [window-ring-order]
#: about: the cached mask is sliding_window_mask(n, held + n, window, offset=held), as if the ring's slots were in time order: right until the ring wraps
"""A submission of exercise 18: a correct mask, used on the ring as if it were a list."""
import math

import torch

from gpt import GPT
from multihead import merge_heads, split_heads


def sliding_window_mask(n_query, n_key, window, offset=0):
    if window < 1:
        raise ValueError("window must be >= 1")
    q = torch.arange(offset, offset + n_query)[:, None]
    k = torch.arange(n_key)[None, :]
    return (k > q) | (k <= q - window)


def _attend(attn, q, k, v, blocked):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)).masked_fill(blocked, float("-inf"))
    weights = attn.dropout(torch.softmax(scores, dim=-1).nan_to_num(0.0))
    return attn.out_proj(merge_heads(weights @ v))


def sliding_window_attention(attn, x, window, pad_mask=None):
    q, k, v = (split_heads(w(x), attn.num_heads) for w in (attn.W_query, attn.W_key, attn.W_value))
    blocked = sliding_window_mask(x.size(1), x.size(1), window).to(x.device)
    if pad_mask is not None:
        blocked = blocked | pad_mask[:, None, None, :]
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
        self.counts = [0] * num_layers

    def __len__(self):
        return 0 if self.keys[0] is None else self.keys[0].size(-2)

    @property
    def seen(self):
        return self.counts[0]

    def append(self, layer, k, v):
        start, n = self.counts[layer], k.size(-2)
        held = 0 if self.keys[layer] is None else self.keys[layer].size(-2)
        slots = torch.arange(held)
        held_pos = slots + self.window * ((start - 1 - slots) // self.window)
        positions = torch.cat([held_pos, torch.arange(start, start + n)])
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        total = start + n
        keep = positions >= total - self.window
        size = min(total, self.window)
        ring_k = k.new_empty(*k.shape[:-2], size, k.size(-1))
        ring_v = v.new_empty(*v.shape[:-2], size, v.size(-1))
        ring_k[..., positions[keep] % self.window, :] = k[..., keep, :]
        ring_v[..., positions[keep] % self.window, :] = v[..., keep, :]
        self.keys[layer], self.values[layer], self.counts[layer] = ring_k, ring_v, total
        return k, v, positions


def forward_cached(model, idx, cache):
    n = idx.size(1)
    start = cache.seen
    x = model.drop(model.tok_emb(idx))
    for layer, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        q = split_heads(attn.W_query(h), attn.num_heads)
        keys, values, _ = cache.append(layer, split_heads(attn.W_key(h), attn.num_heads),
                                       split_heads(attn.W_value(h), attn.num_heads))
        held = keys.size(-2) - n
        blocked = sliding_window_mask(n, held + n, cache.window, offset=held).to(idx.device)
        x = x + block.drop(_attend(attn, q, keys, values, blocked))
        x = x + block.drop(block.ff(block.norm2(x)))
    return model.head(model.final_norm(x))


def receptive_field(num_layers, window):
    if num_layers < 0 or window < 1:
        raise ValueError("need num_layers >= 0 and window >= 1")
    return num_layers * (window - 1) + 1
