#: expect: full
#: about: annotated-transformer attention() with torch.where masking and masks from triu on a float matrix
import math

import torch


def causal_mask(seq_len, device=None):
    return torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1) == 1


def padding_mask(lengths, seq_len):
    lengths = torch.as_tensor(lengths)
    steps = torch.arange(seq_len, device=lengths.device).expand(len(lengths), seq_len)
    return steps >= lengths.unsqueeze(1)


def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = torch.where(mask, torch.tensor(float("-inf"), dtype=scores.dtype), scores)
    all_blocked = torch.isinf(scores).all(-1, keepdim=True) & (scores < 0).all(-1, keepdim=True)
    p_attn = torch.where(all_blocked, torch.zeros_like(scores), scores).softmax(dim=-1)
    p_attn = torch.where(all_blocked, torch.zeros_like(p_attn), p_attn)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
