"""Exam tests for exercise 03 with YOUR variant's sizes (../variant.json).

Run: pytest 03_masking   (from your exam folder)

The grader's hidden checks use your variant too, with other random inputs:
passing these tests is necessary, not sufficient. The oracle is PyTorch's
F.scaled_dot_product_attention, whose boolean mask means True = ALLOWED (the
opposite of this course's masks): that is why it gets ``~mask``.
"""
import torch
import torch.nn.functional as F

from coursekit import expect
from coursekit.probes.masking import attention_output, causal_mask_output, padding_mask_output


def randn(variant, salt, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(variant["seed"] * 100 + salt))


def test_causal_mask_of_your_length(student, variant):
    n = variant["sizes"]["seq_len"]
    got = causal_mask_output(student, n)
    expected = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    expect.shape(got, (n, n), what=f"causal_mask({n})")
    expect.equal(got.tolist(), expected.tolist(), what=f"causal_mask({n}): True exactly where key > query",
                 pitfalls=["mask-off-by-one", "mask-inverted"])


def test_padding_mask_of_your_batch(student, variant):
    b, n = variant["sizes"]["batch"], variant["sizes"]["seq_len"]
    lengths = torch.randint(0, n + 1, (b,), generator=torch.Generator().manual_seed(variant["seed"]))
    result = padding_mask_output(student, lengths, n)
    expected = torch.arange(n) >= lengths.unsqueeze(-1)
    expect.equal(result["mask"].tolist(), expected.tolist(),
                 what=f"padding_mask({lengths.tolist()}, {n}): True at positions >= the length",
                 pitfalls=["mask-inverted"])


def test_causal_attention_over_your_heads(student, variant):
    s = variant["sizes"]
    shape = (s["batch"], s["heads"], s["seq_len"], s["head_dim"])
    q, k, v = (randn(variant, salt, *shape) for salt in (1, 2, 3))
    mask = torch.triu(torch.ones(s["seq_len"], s["seq_len"], dtype=torch.bool), diagonal=1)
    result = attention_output(student, q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    expect.close(result["output"], expected, what=f"causal attention on {shape} queries, keys and values",
                 pitfalls=["missing-scale", "scale-by-d", "mask-inverted", "mask-after-softmax", "softmax-wrong-dim"])


def test_attention_to_padded_keys_of_your_sizes(student, variant):
    s = variant["sizes"]
    b, n_q, n_k, d_k, d_v = s["batch"], s["seq_len"], s["context_length"], s["head_dim"], s["d_model"]
    q, k, v = randn(variant, 4, b, n_q, d_k), randn(variant, 5, b, n_k, d_k), randn(variant, 6, b, n_k, d_v)
    lengths = torch.randint(1, n_k + 1, (b,), generator=torch.Generator().manual_seed(variant["seed"] + 7))
    mask = (torch.arange(n_k) >= lengths.unsqueeze(-1))[:, None, :]       # (b, 1, n_k): blocked keys
    result = attention_output(student, q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    expect.shape(result["output"], (b, n_q, d_v), what=f"the output for query {(b, n_q, d_k)}, value {(b, n_k, d_v)}")
    expect.close(result["output"], expected, what=f"attention of {n_q} queries to {n_k} keys, padding lengths {lengths.tolist()}",
                 pitfalls=["missing-scale", "scale-by-d", "mask-inverted", "mask-after-softmax"])
