"""Exercise 13: train a GPT on text, then sample from it.

`gpt.py` in this folder is exercise 12's solution, working code you can
use: `GPT(vocab_size, context_length, d_model, num_heads, num_layers,
dropout=0.0)` returns logits and keeps `model.context_length`. The functions
below take any such model: token ids (b, n) -> logits (b, n, vocab_size),
with a `context_length` attribute. `coursekit.probes.corpus` gives the text
(the Python standard library's own source, as characters): see README.md.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def get_batch(data: torch.Tensor, batch_size: int, context_length: int,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """data: 1-D token ids. Returns (x, y), both (batch_size, context_length),
    torch.long: batch_size windows of data starting at random positions
    (torch.randint with `generator`), every start in 0 .. len(data) - context_length - 1
    possible; y is the window shifted by one token (the next token of each)."""
    raise NotImplementedError("get_batch: see README.md, section 'Batches'")


def compute_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of model(x) (b, n, vocab_size) against the
    targets y (b, n), over every position: a scalar tensor with its graph."""
    raise NotImplementedError("compute_loss: see README.md, section 'The loss'")


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               grad_clip: float = 1.0) -> float:
    """One step in training mode: the loss of (x, y), fresh gradients, their
    total norm clipped to grad_clip, one optimizer step. Returns the loss
    (a Python float, measured before the step)."""
    raise NotImplementedError("train_step: see README.md, section 'One training step'")


def estimate_loss(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The mean of compute_loss over batches (a list of (x, y)), in
    evaluation mode and without gradients: a Python float."""
    raise NotImplementedError("estimate_loss: see README.md, section 'The held-out loss'")


def train(model: nn.Module, optimizer: torch.optim.Optimizer, train_data: torch.Tensor, val_data: torch.Tensor, *,
          steps: int, batch_size: int, grad_clip: float = 1.0, eval_every: int = 100, eval_batches: int = 10,
          generator: torch.Generator | None = None) -> dict:
    """steps calls of train_step on get_batch(train_data, batch_size,
    model.context_length, generator); after every eval_every steps and
    after the last, estimate_loss on eval_batches batches of val_data.
    Returns {"train": [the loss of each step], "val": [(steps done, held-out loss), ...]}."""
    raise NotImplementedError("train: see README.md, section 'The loop'")


def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """idx (b, n) token ids followed by max_new_tokens sampled ones:
    (b, n + max_new_tokens). Evaluation mode, no gradients; at each step the
    last model.context_length tokens go in, the last position's logits are
    divided by temperature, only the top_k largest kept (when top_k is not
    None), and torch.multinomial draws the next token from their softmax
    (with `generator`, so that a seeded generator gives the same tokens).
    temperature must be > 0: raise ValueError for temperature <= 0 (a
    division by 0 gives inf or NaN; the limit T -> 0 is the argmax, top_k=1)."""
    raise NotImplementedError("generate: see README.md, section 'Sampling'")
