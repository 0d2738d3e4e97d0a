"""Exercise 18: sliding-window attention with a rolling cache.

`gpt.py` in this folder is exercise 12's solution, working code you can
use (with `multihead.py` and `causal_attention.py`, which it imports). The
model your functions drive is its GPT WITHOUT positions (NoPE):
``model.pos_emb`` is None, so add no position at all; see README.md, 'The
model you drive'. Using `F.scaled_dot_product_attention`,
`nn.MultiheadAttention` or `nn.TransformerEncoderLayer` /
`nn.TransformerDecoderLayer` is not allowed.
"""
import math

import torch
from torch import nn

from gpt import GPT
from multihead import merge_heads, split_heads


def sliding_window_mask(n_query: int, n_key: int, window: int, offset: int = 0) -> torch.Tensor:
    """returns: (n_query, n_key) bool, True = blocked. Query i sits at
             position offset + i, key j at position j; query i may see
             only keys offset + i - window + 1 .. offset + i
    raises ValueError when window < 1
    """
    raise NotImplementedError("sliding_window_mask: see README.md, section 'The window mask'")


def sliding_window_attention(attn: nn.Module, x: torch.Tensor, window: int,
                             pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """attn:     the shipped MultiHeadAttention (use its W_query, W_key,
              W_value, out_proj, dropout, num_heads, head_dim)
    x:        (b, n, d_in), any n (also more than attn.context_length)
    pad_mask: None, or (b, n) bool, True at padding
    returns:  (b, n, d_out): attn's causal attention with every query
              restricted to its window, padding keys blocked too
    """
    raise NotImplementedError("sliding_window_attention: see README.md, section 'Windowed attention'")


def windowed_forward(model: GPT, idx: torch.Tensor, window: int,
                     pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """idx:     (b, n) token ids, any n (also more than model.context_length)
    returns: logits (b, n, vocab_size) of the NoPE model with every block's
             attention restricted to ``window`` (no positions added)
    """
    raise NotImplementedError("windowed_forward: see README.md, section 'The model you drive'")


class RollingKVCache:
    """The keys and values of the last ``window`` positions of every layer,
    in a ring buffer: position p in slot p % window."""

    def __init__(self, num_layers: int, window: int) -> None:
        """An empty cache for a model of ``num_layers`` blocks; ValueError when window < 1.
        Attributes (part of the contract): window; keys and values, lists of
        num_layers entries, None or (b, h, min(seen, window), head_dim)."""
        raise NotImplementedError("RollingKVCache.__init__: see README.md, section 'The rolling cache'")

    def __len__(self) -> int:
        """The number of positions held (0 for a new cache, never more than window)."""
        raise NotImplementedError("RollingKVCache.__len__: see README.md, section 'The rolling cache'")

    @property
    def seen(self) -> int:
        """The number of positions appended so far: the next token's position."""
        raise NotImplementedError("RollingKVCache.seen: see README.md, section 'The rolling cache'")

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """k, v:    (b, h, n, head_dim) of the next n positions of block ``layer``
        returns: (keys, values, positions): what these n queries attend to,
                 the held keys and values followed by the new ones,
                 (b, h, held + n, head_dim), and the position of each, (held + n,)
        Afterwards the layer holds only the last ``window`` positions,
        position p in slot p % window.
        """
        raise NotImplementedError("RollingKVCache.append: see README.md, section 'The rolling cache'")


def forward_cached(model: GPT, idx: torch.Tensor, cache: RollingKVCache) -> torch.Tensor:
    """idx:     (b, n) new token ids, at positions cache.seen .. cache.seen + n - 1
    returns: logits (b, n, vocab_size), exactly those of
             windowed_forward(model, all tokens so far, cache.window) at
             these positions, however many tokens came before
    """
    raise NotImplementedError("forward_cached: see README.md, section 'Cached steps'")


def receptive_field(num_layers: int, window: int) -> int:
    """How many positions, the last one's own included, can influence the
    last token's output after ``num_layers`` windowed layers.
    raises ValueError when num_layers < 0 or window < 1
    """
    raise NotImplementedError("receptive_field: see README.md, section 'The receptive field'")
