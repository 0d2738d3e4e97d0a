#: expect: loses
#: fails: [13-train-loop]
#: about: the held-out loss only after every eval_every steps, not after the last when steps is not a multiple of it (issue 31, item 2)
"""A submission of exercise 13: the reference with the mistake its label describes."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def get_batch(data: torch.Tensor, batch_size: int, context_length: int,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """batch_size random windows of data (1-D token ids): contexts x and
    targets y, both (batch_size, context_length); y is x shifted by one."""
    # The last start still leaves one token after the window for its target.
    starts = torch.randint(len(data) - context_length, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + context_length] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + 1 + context_length] for s in starts.tolist()])
    return x, y


def compute_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of model(x) against y over every position."""
    logits = model(x)                                   # (b, n, vocab_size)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               grad_clip: float = 1.0) -> float:
    """One optimiser step on the batch (x, y), in training mode, with the
    gradient's total norm clipped to grad_clip; the loss before the step."""
    model.train()
    loss = compute_loss(model, x, y)
    optimizer.zero_grad(set_to_none=True)   # or the last step's gradient adds to this one
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


@torch.no_grad()
def estimate_loss(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean loss over batches, in evaluation mode, without gradients."""
    model.eval()
    losses = [compute_loss(model, x, y).item() for x, y in batches]
    return sum(losses) / len(losses)


def train(model: nn.Module, optimizer: torch.optim.Optimizer, train_data: torch.Tensor, val_data: torch.Tensor, *,
          steps: int, batch_size: int, grad_clip: float = 1.0, eval_every: int = 100, eval_batches: int = 10,
          generator: torch.Generator | None = None) -> dict:
    """steps train_steps on random batches of train_data; the held-out loss
    on eval_batches batches of val_data after every eval_every steps and
    after the last. Returns {"train": [loss of each step],
    "val": [(steps done, held-out loss), ...]}."""
    context_length = model.context_length
    history: dict = {"train": [], "val": []}
    for step in range(1, steps + 1):
        x, y = get_batch(train_data, batch_size, context_length, generator)
        history["train"].append(train_step(model, optimizer, x, y, grad_clip))
        if step % eval_every == 0:
            batches = [get_batch(val_data, batch_size, context_length, generator) for _ in range(eval_batches)]
            history["val"].append((step, estimate_loss(model, batches)))
    return history


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """idx (b, n) followed by max_new_tokens sampled tokens: (b, n + max_new_tokens)."""
    model.eval()
    for _ in range(max_new_tokens):
        context = idx[:, -model.context_length:]          # the model knows no more positions
        logits = model(context)[:, -1, :] / temperature   # (b, vocab_size): the next token's scores
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, [-1]]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        next_token = torch.multinomial(probs, num_samples=1, generator=generator)   # (b, 1)
        idx = torch.cat([idx, next_token], dim=1)
    return idx
