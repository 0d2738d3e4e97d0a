#: expect: full
#: about: buffers of context_length positions allocated on the first append and filled up; einsum attention; the mask from comparing positions; a hand-written safe softmax
"""A submission of exercise 14: preallocated cache buffers, einsum, positions compared."""
import math

import torch

from gpt import GPT


class KVCache:
    def __init__(self, num_layers, context_length):
        self.context_length = context_length
        self.k = [None] * num_layers
        self.v = [None] * num_layers
        self.filled = [0] * num_layers

    def __len__(self):
        return self.filled[0]

    def append(self, layer, k, v):
        end = self.filled[layer] + k.shape[2]
        if end > self.context_length:
            raise ValueError("the cache is full")
        if self.k[layer] is None:
            shape = (k.shape[0], k.shape[1], self.context_length, k.shape[3])
            self.k[layer] = k.new_zeros(shape)
            self.v[layer] = v.new_zeros(shape)
        self.k[layer][:, :, self.filled[layer]:end] = k
        self.v[layer][:, :, self.filled[layer]:end] = v
        self.filled[layer] = end
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]


def _heads(t, h):
    b, n, d = t.shape
    return t.view(b, n, h, d // h).permute(0, 2, 1, 3)


def forward_cached(model, idx, cache, pad_mask=None):
    b, n = idx.shape
    t0 = len(cache)
    if t0 + n > model.context_length:
        raise ValueError("too many positions")
    query_pos = torch.arange(t0, t0 + n, device=idx.device)
    key_pos = torch.arange(t0 + n, device=idx.device)
    allowed = (key_pos[None, :] <= query_pos[:, None])[None, None]            # (1, 1, n, t0+n)
    if pad_mask is not None:
        allowed = allowed & ~pad_mask[:, None, None, :]
        pos = torch.clamp(torch.cumsum((~pad_mask).to(torch.long), dim=1) - 1, min=0)[:, t0:]
    else:
        pos = query_pos[None, :]
    x = model.drop(model.tok_emb(idx) + model.pos_emb(pos))
    for i, blk in enumerate(model.blocks):
        a = blk.attn
        h = blk.norm1(x)
        q = _heads(a.W_query(h), a.num_heads)
        k, v = cache.append(i, _heads(a.W_key(h), a.num_heads), _heads(a.W_value(h), a.num_heads))
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(a.head_dim)
        s = s.masked_fill(~allowed, float("-inf"))
        top = s.amax(dim=-1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        e = torch.exp(s - top)
        w = a.dropout(e / e.sum(dim=-1, keepdim=True).clamp_min(1e-300))
        out = torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(b, n, -1)
        x = x + blk.drop(a.out_proj(out))
        x = x + blk.drop(blk.ff(blk.norm2(x)))
    return model.head(model.final_norm(x))


@torch.no_grad()
def generate_cached(model, idx, max_new_tokens):
    out = idx
    cache = None
    last = None
    for _ in range(max_new_tokens):
        if cache is None or len(cache) == model.context_length:
            cache = KVCache(len(model.blocks), model.context_length)
            last = forward_cached(model, out[:, -model.context_length:], cache)[:, -1]
        nxt = torch.argmax(last, dim=-1)[:, None]
        out = torch.cat((out, nxt), dim=1)
        if len(cache) < model.context_length:
            last = forward_cached(model, nxt, cache)[:, -1]
        else:
            cache = None
    return out


@torch.no_grad()
def generate_batch(model, prompts, max_new_tokens, pad_id):
    width = max(p.numel() for p in prompts)
    if width + max_new_tokens > model.context_length:
        raise ValueError("too long")
    rows = [torch.cat([p.new_full((width - p.numel(),), pad_id), p]) for p in prompts]
    idx = torch.stack(rows)
    pad = torch.stack([torch.arange(width) < width - p.numel() for p in prompts]).to(idx.device)
    cache = KVCache(len(model.blocks), model.context_length)
    logits = forward_cached(model, idx, cache, pad)
    outs = [p.clone() for p in prompts]
    for step in range(max_new_tokens):
        nxt = logits[:, -1].argmax(-1)
        outs = [torch.cat([o, nxt[i:i + 1]]) for i, o in enumerate(outs)]
        if step + 1 < max_new_tokens:
            pad = torch.cat([pad, torch.zeros(len(prompts), 1, dtype=torch.bool, device=pad.device)], dim=1)
            logits = forward_cached(model, nxt[:, None], cache, pad)
    return outs
