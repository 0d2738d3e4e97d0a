"""Exercise 16: rotary position embeddings (RoPE).

`multihead.py` (exercise 06), `gpt.py` (exercise 12) and `kv_cache.py`
(exercise 14) in this folder are those exercises' solutions, working code
you can use: `MultiHeadAttention`, `split_heads`, `merge_heads`,
`GPTBlock` and `KVCache` (see README.md, 'What ships with this exercise').
Using `F.scaled_dot_product_attention`, `nn.MultiheadAttention` or
`nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` is not allowed.

Pairing convention: pair k is (x[..., 2k], x[..., 2k+1]) (RoFormer, Meta's
LLaMA), not the two halves of GPT-NeoX / Hugging Face (README.md, 'Two
conventions').
"""
import math

import torch
from torch import nn

from gpt import GPTBlock
from kv_cache import KVCache
from multihead import MultiHeadAttention, merge_heads, split_heads


def rope_angles(context_length: int, head_dim: int, base: float = 10000.0,
                dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """returns: (cos, sin), each (context_length, head_dim // 2): entry (p, k)
             is cos / sin of p * theta_k, theta_k = base ** (-2k / head_dim),
             in ``dtype`` (None: torch's default dtype)
    raises ValueError when head_dim is odd
    """
    raise NotImplementedError("rope_angles: see README.md, section 'The angles'")


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x:         (b, h, n, head_dim)
    positions: (n,) one position per token, or (b, n) one row per sequence
               (the same for every head)
    returns:   a new tensor like x, pair (2k, 2k+1) of each token rotated by
               position * theta_k; x itself is left unchanged
    raises ValueError when head_dim is odd
    """
    raise NotImplementedError("apply_rope: see README.md, section 'The rotation'")


class RoPEMultiHeadAttention(nn.Module):
    """Exercise 06's causal MultiHeadAttention (the same parameter names:
    W_query, W_key, W_value, out_proj, dropout, buffer mask) with RoPE on
    the queries and keys, after the heads are split. Not on the values."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        """raises ValueError when d_out // num_heads is odd (or d_out % num_heads != 0)"""
        super().__init__()
        raise NotImplementedError("RoPEMultiHeadAttention.__init__: see README.md, section 'RoPE in attention'")

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x: (b, n, d_in), n <= context_length
        positions: None (0 .. n-1), (n,) or (b, n)
        returns: (b, n, d_out)
        """
        raise NotImplementedError("RoPEMultiHeadAttention.forward: see README.md, section 'RoPE in attention'")


class RoPEGPTBlock(nn.Module):
    """Exercise 12's pre-norm GPTBlock (norm1, attn, norm2, ff, drop) whose
    attn is a RoPEMultiHeadAttention."""

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        raise NotImplementedError("RoPEGPTBlock.__init__: see README.md, section 'A GPT with RoPE'")

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x: (b, n, d_model); positions as RoPEMultiHeadAttention's -> (b, n, d_model)"""
        raise NotImplementedError("RoPEGPTBlock.forward: see README.md, section 'A GPT with RoPE'")


class RoPEGPT(nn.Module):
    """Exercise 12's GPT without pos_emb: tok_emb, drop, blocks (RoPEGPTBlock),
    final_norm, head (tied to tok_emb when tie_weights)."""

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int,
                 dropout: float = 0.0, qkv_bias: bool = False, tie_weights: bool = True) -> None:
        super().__init__()
        raise NotImplementedError("RoPEGPT.__init__: see README.md, section 'A GPT with RoPE'")

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx: (b, n) token ids, n <= context_length (else ValueError)
        returns: logits (b, n, vocab_size)
        """
        raise NotImplementedError("RoPEGPT.forward: see README.md, section 'A GPT with RoPE'")


def forward_cached(model: RoPEGPT, idx: torch.Tensor, cache: KVCache,
                   pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Exercise 14's forward_cached for a RoPEGPT.
    idx:      (b, n) new token ids, after the len(cache) positions cached
    pad_mask: None, or (b, len(cache) + n) bool, True at padding (left
              padding), covering the cached and the new positions
    returns:  logits (b, n, vocab_size) of the new tokens, exactly those of
              model(all tokens so far) at these positions; their (rotated)
              keys and their values are appended to the cache
    raises ValueError when len(cache) + n > context_length
    """
    raise NotImplementedError("forward_cached: see README.md, section 'With a KV cache'")
