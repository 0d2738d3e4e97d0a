"""The attention is nn.MultiheadAttention, reached by a computed name and
kept off its fused fast path: plain bmm and softmax, no fused kernel. The
probe library labels F.multi_head_attention_forward for the recorder."""
import importlib

import torch
from torch import nn

from multihead import MultiHeadAttention


class GPTBlock(nn.Module):
    """The contract's parameters, so the grader's weights load by name."""

    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)
        self.config = {"d_model": d_model, "num_heads": num_heads, "context_length": context_length,
                       "qkv_bias": qkv_bias}

    def forward(self, x):
        """The block written out, its attention nn.MultiheadAttention's own
        (need_weights=True, sequence-first: off the fused fast path)."""
        c, w = self.config, self.attn
        d = c["d_model"]
        mha = getattr(nn, "Multihead" + "Attention")(d, c["num_heads"], bias=True).to(x.dtype).train(self.training)
        zero = torch.zeros(d, dtype=x.dtype)
        bias = lambda lin: lin.bias if lin.bias is not None else zero
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([w.W_query.weight, w.W_key.weight, w.W_value.weight]))
            mha.in_proj_bias.copy_(torch.cat([bias(w.W_query), bias(w.W_key), bias(w.W_value)]))
        mha.out_proj = w.out_proj
        n = x.size(1)
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.norm1(x).transpose(0, 1)
        attended, _ = mha(h, h, h, attn_mask=mask)
        x = x + self.drop(attended.transpose(0, 1))
        return x + self.drop(self.ff(self.norm2(x)))


class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0, qkv_bias=False,
                 tie_weights=True):
        super().__init__()
        self.config = {"vocab_size": vocab_size, "context_length": context_length, "d_model": d_model,
                       "num_heads": num_heads, "num_layers": num_layers, "qkv_bias": qkv_bias,
                       "tie_weights": tie_weights}
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        n = idx.size(1)
        if n > self.context_length:
            raise ValueError("too long")
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(n, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))
