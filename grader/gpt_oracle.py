"""Exercise 12's oracle, on the trusted side only: PyTorch's own pre-norm
layer. A GPT block computes what ``nn.TransformerEncoderLayer(norm_first=True,
activation="gelu")`` with a causal mask and d_ff = 4 * d_model computes.

It lived in ``coursekit.probes.gpt``, which ships to students and is
importable in the grading child: a ``GPT.forward`` that called it on its
own state_dict scored the logits without writing a block (issue 36). Here,
under grader/ (never shipped, unreadable from the sandbox), it generates the
public tests' stored expected values (grader/fixtures.py) and names the
mistakes they diagnose; the hidden checks compare with the reference's run.
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from coursekit.probes.gpt import DEFAULTS, Weights


def torch_block(weights: Weights, d_model: int, num_heads: int, prefix: str = "") -> nn.TransformerEncoderLayer:
    """``nn.TransformerEncoderLayer(norm_first=True, activation="gelu")``
    holding the block weights found under ``prefix`` (missing q/k/v biases
    are zero), in eval mode."""
    layer = nn.TransformerEncoderLayer(d_model, num_heads, 4 * d_model, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    w = {name[len(prefix):]: t for name, t in weights.items() if name.startswith(prefix)}
    zero = torch.zeros(d_model, dtype=w["norm1.weight"].dtype)
    state = {
        "self_attn.in_proj_weight": torch.cat([w[f"attn.{r}.weight"] for r in ("W_query", "W_key", "W_value")]),
        "self_attn.in_proj_bias": torch.cat([w.get(f"attn.{r}.bias", zero) for r in ("W_query", "W_key", "W_value")]),
        "self_attn.out_proj.weight": w["attn.out_proj.weight"], "self_attn.out_proj.bias": w["attn.out_proj.bias"],
        "linear1.weight": w["ff.0.weight"], "linear1.bias": w["ff.0.bias"],
        "linear2.weight": w["ff.2.weight"], "linear2.bias": w["ff.2.bias"],
        **{f"{norm}.{p}": w[f"{norm}.{p}"] for norm in ("norm1", "norm2") for p in ("weight", "bias")},
    }
    layer.load_state_dict(state)
    return layer.to(w["norm1.weight"].dtype).eval()


def _causal(n: int) -> torch.Tensor:
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


@torch.no_grad()
def oracle_block(config: dict, weights: Weights, x: torch.Tensor, arrangement: str = "pre-norm") -> torch.Tensor:
    """What ``GPTBlock(**config)`` with ``weights`` returns for ``x`` in eval
    mode. Other ``arrangement``s of the same sublayers, to name a mistake:
    ``"post-norm"`` (exercise 09's layer), ``"residual-after-norm"``
    (``x = norm1(x); x = x + attn(x)``, the same for the feed-forward) and
    ``"gelu-tanh"`` (pre-norm with GPT-2's approximate GELU)."""
    layer = torch_block(weights, config["d_model"], config["num_heads"])
    mask = _causal(x.size(1))
    if arrangement == "pre-norm":
        return layer(x, src_mask=mask)
    attend = lambda h: layer._sa_block(h, mask, None)  # noqa: E731 - torch's own sublayers
    if arrangement == "post-norm":
        x = layer.norm1(x + attend(x))
        return layer.norm2(x + layer._ff_block(x))
    if arrangement == "gelu-tanh":
        layer.activation = lambda h: F.gelu(h, approximate="tanh")
        x = x + attend(layer.norm1(x))
        return x + layer._ff_block(layer.norm2(x))
    if arrangement == "residual-after-norm":
        x = layer.norm1(x)
        x = x + attend(x)
        x = layer.norm2(x)
        return x + layer._ff_block(x)
    raise ValueError(f"unknown arrangement {arrangement!r}")


@torch.no_grad()
def oracle_logits(config: dict, weights: Weights, idx: torch.Tensor, final_norm: bool = True,
                  first_position: int = 0) -> torch.Tensor:
    """What ``GPT(**config)`` with ``weights`` returns for ``idx`` in eval
    mode. To name a mistake: without ``final_norm``, or with positions
    starting at ``first_position`` instead of 0."""
    c = {**DEFAULTS, **config}
    n = idx.size(1)
    x = F.embedding(idx, weights["tok_emb.weight"]) + weights["pos_emb.weight"][first_position:first_position + n]
    for i in range(c["num_layers"]):
        x = torch_block(weights, c["d_model"], c["num_heads"], f"blocks.{i}.")(x, src_mask=_causal(n))
    if final_norm:
        x = F.layer_norm(x, (c["d_model"],), weights["final_norm.weight"], weights["final_norm.bias"])
    return x @ weights["head.weight"].T
