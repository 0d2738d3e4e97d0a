"""Exercise 12, reference solution: a GPT (decoder-only, pre-norm, as GPT-2).

`multihead.py` (exercise 06) ships beside this file: its MultiHeadAttention
is causal, keeps its own (context_length, context_length) mask and slices
it to the input's length.
"""
import torch
from torch import nn

from multihead import MultiHeadAttention


class GPTBlock(nn.Module):
    """One pre-norm decoder block: each sublayer reads a normalised copy of
    the residual stream and adds its output back to it."""

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(d_model)
        # GPT-2's MLP: widen by 4, GELU, back to d_model.
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, n, d_model) -> (b, n, d_model)."""
        # The norm sits on the branch, never on the stream: x itself is
        # carried to the output unchanged, plus what the sublayers add.
        x = x + self.drop(self.attn(self.norm1(x)))
        x = x + self.drop(self.ff(self.norm2(x)))
        return x


class GPT(nn.Module):
    """Token and learned position embeddings, a stack of GPTBlocks, a final
    LayerNorm and a linear head that returns logits."""

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int,
                 dropout: float = 0.0, qkv_bias: bool = False, tie_weights: bool = True) -> None:
        super().__init__()
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            GPTBlock(d_model, num_heads, context_length, dropout, qkv_bias) for _ in range(num_layers)
        )
        # Pre-norm blocks never normalise the stream itself: this is the
        # only LayerNorm between the last block and the head.
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            # One Parameter under two names: both uses add to its gradient.
            self.head.weight = self.tok_emb.weight
        # GPT-2's initialisation, N(0, 0.02), not nn.Embedding's N(0, 1): the
        # tied head multiplies a normalised vector (entries of size ~1) by
        # these rows, so the logits' scale is the embedding's scale times
        # sqrt(d_model). At 0.02 the untrained model's logits are near 0,
        # its predictions near uniform and its first loss near log(vocab_size).
        nn.init.normal_(self.tok_emb.weight, mean=0.0, std=0.02)
        nn.init.normal_(self.pos_emb.weight, mean=0.0, std=0.02)
        if not tie_weights:
            nn.init.normal_(self.head.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (b, n) token ids, n <= context_length -> logits (b, n, vocab_size)."""
        n = idx.size(1)
        if n > self.context_length:
            raise ValueError(f"input has {n} tokens, more than context_length={self.context_length}")
        positions = torch.arange(n, device=idx.device)                # 0 .. n-1, whatever n is
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))    # (b, n, d_model)
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))                          # (b, n, vocab_size)
