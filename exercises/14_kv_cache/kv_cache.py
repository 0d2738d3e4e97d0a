"""Exercise 14: a KV cache and batched generation.

`gpt.py` in this folder is exercise 12's solution, working code you can
use (with `multihead.py` and `causal_attention.py`, which it imports). Your
functions run its GPT's own layers; see README.md, 'The model you drive',
for the names. Using `F.scaled_dot_product_attention`, `nn.MultiheadAttention`
or `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` is not allowed.
"""
import math

import torch
from torch import nn

from gpt import GPT
from multihead import merge_heads, split_heads


class KVCache:
    """The keys and values of every layer for the positions seen so far,
    never more than ``context_length`` positions."""

    def __init__(self, num_layers: int, context_length: int) -> None:
        """An empty cache for a model of ``num_layers`` blocks."""
        raise NotImplementedError("KVCache.__init__: see README.md, section 'What to write'")

    def __len__(self) -> int:
        """The number of positions cached (0 for a new cache). Read between
        calls of forward_cached, when every layer holds the same positions,
        so any layer's count will do."""
        raise NotImplementedError("KVCache.__len__: see README.md, section 'What to write'")

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v: (b, h, n, head_dim) of the new positions, for block ``layer``
        returns: all keys and values of that layer so far, (b, h, t + n, head_dim)
        raises ValueError when t + n > context_length (nothing is stored then)
        """
        raise NotImplementedError("KVCache.append: see README.md, section 'What to write'")


def forward_cached(model: GPT, idx: torch.Tensor, cache: KVCache,
                   pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """idx:      (b, n) new token ids, after the len(cache) positions cached
    pad_mask: None, or (b, len(cache) + n) bool, True at padding, covering
              the cached and the new positions
    returns:  logits (b, n, vocab_size) of the new tokens, exactly those of
              model(all tokens so far) at these positions; their keys and
              values are appended to the cache
    raises ValueError when len(cache) + n > context_length
    """
    raise NotImplementedError("forward_cached: see README.md, sections 'Positions' and 'The mask'")


@torch.no_grad()
def generate_cached(model: GPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a cache: idx (b, n) -> (b, n + max_new_tokens),
    the same tokens as recomputing model(idx[:, -context_length:]) at every
    step, also past context_length. Puts the model in eval mode itself, as
    exercise 13's generate does."""
    raise NotImplementedError("generate_cached: see README.md, section 'At the context limit'")


@torch.no_grad()
def generate_batch(model: GPT, prompts: list[torch.Tensor], max_new_tokens: int, pad_id: int) -> list[torch.Tensor]:
    """prompts: 1-D token id tensors of different lengths (each at least one token)
    returns: one 1-D tensor per prompt, the prompt followed by its
             max_new_tokens greedy tokens, as if generated alone
    raises ValueError when the longest prompt + max_new_tokens > context_length
    Puts the model in eval mode itself, as generate_cached does.
    """
    raise NotImplementedError("generate_batch: see README.md, section 'Batched generation'")
