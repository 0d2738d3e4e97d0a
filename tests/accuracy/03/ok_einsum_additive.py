#: expect: full
#: about: einsum scores, an additive float mask (0 / -inf), the -inf rows zeroed with nan_to_num-free arithmetic
import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def padding_mask(lengths, seq_len):
    lengths = torch.as_tensor(lengths)
    return torch.arange(seq_len, device=lengths.device).unsqueeze(0) >= lengths.view(-1, 1)


def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    scale = query.shape[-1] ** -0.5
    scores = torch.einsum("...qd,...kd->...qk", query, key) * scale
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        bias = bias.masked_fill(mask, float("-inf"))
        scores = scores + bias
    blocked = (scores == float("-inf")).all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(blocked, 0.0), dim=-1) * (~blocked)
    if dropout is not None:
        weights = dropout(weights)
    return torch.einsum("...qk,...kd->...qd", weights, value), weights
