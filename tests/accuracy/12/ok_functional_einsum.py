#: expect: full
#: about: functional style: F.embedding, a slice of pos_emb.weight instead of a pos_emb call, F.dropout(training=self.training), F.gelu in a module of its own, F.layer_norm with final_norm's parameters, logits by einsum with head.weight
import torch
import torch.nn.functional as F
from torch import nn
import multihead as mh

class _GELU(nn.Module):
    def forward(self, x):
        return F.gelu(x)

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = mh.MultiHeadAttention(d_in=d_model, d_out=d_model, context_length=context_length,
                                          dropout=dropout, num_heads=num_heads, qkv_bias=qkv_bias)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), _GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        attended = self.attn(self.norm1(x))
        x = torch.add(x, F.dropout(attended, self.drop.p, training=self.training))
        fed = self.ff(self.norm2(x))
        return torch.add(x, F.dropout(fed, self.drop.p, training=self.training))

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias)
                                     for _ in range(num_layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        if idx.shape[-1] > self.context_length:
            raise ValueError(f"{idx.shape[-1]} > {self.context_length}")
        x = F.embedding(idx, self.tok_emb.weight) + self.pos_emb.weight[: idx.shape[-1]]
        x = F.dropout(x, self.drop.p, training=self.training)
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, x.shape[-1:], self.final_norm.weight, self.final_norm.bias, self.final_norm.eps)
        return torch.einsum("bnd,vd->bnv", x, self.head.weight)
