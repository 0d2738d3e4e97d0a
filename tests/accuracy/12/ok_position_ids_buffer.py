#: expect: full
#: about: head created before the embedding and tied the other way round (tok_emb.weight = head.weight), a non-persistent buffer of position ids, blocks appended in a loop, ff built from a list, the residual branch through a helper
import torch
from torch import nn
from multihead import MultiHeadAttention

class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        layers = [nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)]
        self.ff = nn.Sequential(*layers)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias=qkv_bias)
        self.norm2, self.norm1 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def _branch(self, sublayer, norm, x):
        return self.drop(sublayer(norm(x)))

    def forward(self, x):
        x = x + self._branch(self.attn, self.norm1, x)
        return x + self._branch(self.ff, self.norm2, x)

class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_heads, num_layers, dropout=0.0,
                 qkv_bias=False, tie_weights=True):
        super().__init__()
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        if tie_weights:
            self.tok_emb.weight = self.head.weight
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.register_buffer("position_ids", torch.arange(context_length), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList()
        for _ in range(num_layers):
            self.blocks.append(GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias))
        self.final_norm = nn.LayerNorm(d_model)

    def forward(self, idx):
        b, n = idx.shape
        if n > self.position_ids.numel():
            raise ValueError("sequence longer than the context")
        h = self.drop(self.tok_emb(idx) + self.pos_emb(self.position_ids[:n]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.final_norm(h))
