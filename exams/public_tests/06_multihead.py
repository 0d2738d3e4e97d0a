"""Exam tests for exercise 06 with YOUR variant's sizes (../variant.json).

Run: pytest 06_multihead   (from your exam folder)

The grader's hidden checks use your variant too, with other random inputs:
passing these tests is necessary, not sufficient. The oracle is
nn.MultiheadAttention with your module's weights copied in.
"""
import torch
from torch import nn

from coursekit import expect
from coursekit.probes import multihead as probe


def sizes(variant):
    s = variant["sizes"]
    return s["batch"], s["seq_len"], s["context_length"], s["d_model"], s["heads"]


def randn(variant, salt, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(variant["seed"] * 100 + salt))


def torch_multihead(x, weights, num_heads):
    d = x.size(-1)
    oracle = nn.MultiheadAttention(d, num_heads, bias=True, batch_first=True).eval()
    with torch.no_grad():
        oracle.in_proj_weight.copy_(torch.cat([weights[f"{name}.weight"] for name in probe.PROJECTIONS]))
        oracle.in_proj_bias.zero_()
        oracle.out_proj.weight.copy_(weights["out_proj.weight"])
        oracle.out_proj.bias.copy_(weights["out_proj.bias"])
        causal = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), diagonal=1)
        return oracle(x, x, x, attn_mask=causal, need_weights=False)[0]


def test_split_heads_of_your_sizes(student, variant):
    b, n, _, d, h = sizes(variant)
    x = randn(variant, 1, b, n, d)
    result = probe.split_heads_output(student, x, h)
    expect.shape(result["output"], (b, h, n, d // h), what=f"split_heads of a {(b, n, d)} input, {h} heads")
    expect.close(result["output"], torch.stack(x.chunk(h, dim=-1), dim=1),
                 what=f"split_heads of a {(b, n, d)} input, {h} heads (head i = features i*hd...)",
                 pitfalls=["view-no-transpose"])


def test_merge_heads_undoes_split_heads_of_your_sizes(student, variant):
    b, n, _, d, h = sizes(variant)
    y = randn(variant, 2, b, h, n, d // h)
    result = probe.merge_heads_output(student, y)
    expect.close(result["output"], torch.cat(y.unbind(1), dim=-1), what=f"merge_heads of a {(b, h, n, d // h)} input",
                 pitfalls=["merge-wrong-order"])


def test_multihead_attention_of_your_sizes(student, variant):
    b, n, ctx, d, h = sizes(variant)
    config = {"d_in": d, "d_out": d, "context_length": ctx, "dropout": 0.0, "num_heads": h, "qkv_bias": False}
    x, weights = randn(variant, 3, b, n, d), probe.random_weights("MultiHeadAttention", config, seed=variant["seed"])
    result = probe.forward(student, "MultiHeadAttention", config, x, weights)
    what = f"MultiHeadAttention({d}, {d}, {ctx}, 0.0, num_heads={h}) on a {(b, n, d)} input"
    expect.equal(result["load"], {"missing": [], "unexpected": []}, what=f"{what}: the parameter names of the contract",
                 pitfalls=["no-out-proj"])
    expect.close(result["output"], torch_multihead(x, weights, h), what=what + ", compared with nn.MultiheadAttention",
                 pitfalls=["scale-by-d", "view-no-transpose", "merge-wrong-order", "no-out-proj", "mask-no-slice"])
