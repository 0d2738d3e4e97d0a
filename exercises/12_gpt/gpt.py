"""Exercise 12: a GPT (decoder-only Transformer, pre-norm as GPT-2).

`multihead.py` in this folder is exercise 06's solution, working code you
can use: `MultiHeadAttention(d_in, d_out, context_length, dropout,
num_heads, qkv_bias=False)` is causal multi-head self-attention; it keeps
its own causal mask and slices it to the input's length.
Using `F.scaled_dot_product_attention`, `nn.MultiheadAttention` or
`nn.TransformerEncoderLayer` is not allowed.
"""
import torch
from torch import nn

from multihead import MultiHeadAttention


class GPTBlock(nn.Module):
    """One pre-norm block:

        x = x + drop(attn(norm1(x)))
        x = x + drop(ff(norm2(x)))
    """

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False) -> None:
        """Create these sub-modules (the names are part of the contract):

        norm1, norm2: two separate nn.LayerNorm(d_model)
        attn:         MultiHeadAttention(d_model, d_model, context_length, dropout, num_heads, qkv_bias)
        ff:           nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        drop:         nn.Dropout(dropout), on each sublayer's output
        """
        super().__init__()
        raise NotImplementedError("GPTBlock.__init__: see README.md, section 'What to write'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, n, d_model) with n <= context_length -> (batch, n, d_model)."""
        raise NotImplementedError("GPTBlock.forward: see README.md, section 'Pre-norm'")


class GPT(nn.Module):
    """Embeddings, num_layers GPTBlocks, a final LayerNorm and a linear head."""

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int,
                 dropout: float = 0.0, qkv_bias: bool = False, tie_weights: bool = True) -> None:
        """Create these sub-modules (the names are part of the contract):

        tok_emb:    nn.Embedding(vocab_size, d_model)
        pos_emb:    nn.Embedding(context_length, d_model), learned positions
        drop:       nn.Dropout(dropout), on the sum of the two embeddings
        blocks:     an nn.ModuleList of num_layers separate GPTBlocks
        final_norm: nn.LayerNorm(d_model)
        head:       nn.Linear(d_model, vocab_size, bias=False); when
                    tie_weights, head.weight IS tok_emb.weight (one Parameter)

        Then, last, initialise as GPT-2: tok_emb.weight and pos_emb.weight
        from N(0, 0.02) (nn.init.normal_(w, mean=0.0, std=0.02)), and
        head.weight too when it is not tied. With nn.Embedding's N(0, 1) a
        tied head's logits start about sqrt(d_model) large; at 0.02 the
        untrained model's first loss is about log(vocab_size), the check
        to run (README.md, section 'The initialisation').
        """
        super().__init__()
        raise NotImplementedError("GPT.__init__: see README.md, section 'What to write'")

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx:     (batch, n) token ids (torch.long), 1 <= n <= context_length;
                 n > context_length raises ValueError
        returns: logits (batch, n, vocab_size), no softmax
        """
        raise NotImplementedError("GPT.forward: see README.md, section 'The forward pass'")
