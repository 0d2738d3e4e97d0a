#: expect: full
#: about: positions expanded to (b, n) before the lookup, blocks applied with functools.reduce, the head made (and tied) in a helper method, GELU(approximate='none') spelled out
import functools
import torch
from torch import nn
from multihead import MultiHeadAttention

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="none"),
                                nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        residual = x
        x = residual + self.drop(self.attn(self.norm1(residual)))
        residual = x
        return residual + self.drop(self.ff(self.norm2(residual)))

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                    for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self._make_head(vocab_size, d_model, tie_weights)

    def _make_head(self, vocab_size, d_model, tie):
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        b, n = idx.shape
        if n > self.context_length:
            raise ValueError("too long")
        positions = torch.arange(n, device=idx.device).unsqueeze(0).expand(b, n)  # (b, n)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        x = functools.reduce(lambda h, block: block(h), self.blocks, x)
        return self.head(self.final_norm(x))
