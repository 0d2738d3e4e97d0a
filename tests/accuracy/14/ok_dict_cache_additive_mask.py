#: expect: full
#: about: the cache a dict of (k, v) per layer; an additive float mask; padding queries allowed to see themselves so no row is empty; positions as column minus the row's padding
"""A submission of exercise 14: a dict cache and an additive mask."""
import math

import torch
from torch import nn
import torch.nn.functional as F

from gpt import GPT
from multihead import merge_heads, split_heads


class KVCache:
    def __init__(self, num_layers: int, context_length: int) -> None:
        self.limit = context_length
        self.store: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __len__(self) -> int:
        return self.store[0][0].shape[-2] if 0 in self.store else 0

    def append(self, layer, k, v):
        if layer in self.store:
            old_k, old_v = self.store[layer]
            k, v = torch.cat((old_k, k), -2), torch.cat((old_v, v), -2)
        if k.shape[-2] > self.limit:
            raise ValueError(f"cache limit {self.limit} exceeded")
        self.store[layer] = (k, v)
        return k, v


def _attention(attn, x, cache, layer, bias):
    q = split_heads(attn.W_query(x), attn.num_heads)
    k, v = cache.append(layer, split_heads(attn.W_key(x), attn.num_heads),
                        split_heads(attn.W_value(x), attn.num_heads))
    w = F.softmax(q @ k.mT / math.sqrt(attn.head_dim) + bias, dim=-1)
    return attn.out_proj(merge_heads(attn.dropout(w) @ v))


def forward_cached(model, idx, cache, pad_mask=None):
    n = idx.shape[1]
    past = len(cache)
    total = past + n
    if total > model.context_length:
        raise ValueError("context_length exceeded")
    rows = torch.arange(past, total, device=idx.device)[:, None]
    cols = torch.arange(total, device=idx.device)[None, :]
    blocked = cols > rows                                               # (n, total)
    if pad_mask is None:
        pos = rows[:, 0]
    else:
        n_pad = pad_mask.sum(dim=1, keepdim=True)                       # left padding: pads come first
        pos = (rows[:, 0][None, :] - n_pad).clamp(min=0)
        blocked = blocked | pad_mask[:, None, None, :]
        blocked = blocked & ~(cols == rows)                             # a token may always see itself
    bias = torch.zeros(blocked.shape, dtype=model.tok_emb.weight.dtype, device=idx.device)
    bias = bias.masked_fill(blocked, float("-inf"))
    h = model.drop(model.tok_emb(idx) + model.pos_emb(pos))
    for layer, block in enumerate(model.blocks):
        h = h + block.drop(_attention(block.attn, block.norm1(h), cache, layer, bias))
        h = h + block.drop(block.ff(block.norm2(h)))
    return model.head(model.final_norm(h))


def generate_cached(model, idx, max_new_tokens):
    with torch.no_grad():
        T = model.context_length
        tokens = list(idx.unbind(1))
        for i in range(max_new_tokens):
            if i == 0 or len(cache) == T:
                cache = KVCache(len(model.blocks), T)
                logits = forward_cached(model, torch.stack(tokens[-T:], 1), cache)
            else:
                logits = forward_cached(model, tokens[-1][:, None], cache)
            tokens.append(logits[:, -1].argmax(-1))
        return torch.stack(tokens, 1) if tokens else idx


def generate_batch(model, prompts, max_new_tokens, pad_id):
    with torch.no_grad():
        L = max(map(len, prompts))
        if L + max_new_tokens > model.context_length:
            raise ValueError("longest prompt + max_new_tokens > context_length")
        idx = torch.stack([F.pad(p, (L - len(p), 0), value=pad_id) for p in prompts])
        pad_mask = torch.stack([F.pad(torch.zeros(len(p), dtype=torch.bool), (L - len(p), 0), value=True)
                                for p in prompts])
        cache = KVCache(len(model.blocks), model.context_length)
        out = idx
        logits = forward_cached(model, idx, cache, pad_mask)
        for i in range(max_new_tokens):
            nxt = logits[:, -1:].argmax(-1)
            out = torch.cat([out, nxt], 1)
            pad_mask = F.pad(pad_mask, (0, 1), value=False)
            if i < max_new_tokens - 1:
                logits = forward_cached(model, nxt, cache, pad_mask)
        return [row[~m] for row, m in zip(out, pad_mask)]
