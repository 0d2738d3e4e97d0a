#: expect: full
#: about: nanoGPT's style: windows by index arithmetic, zero_grad(set_to_none=True) after the step, estimate_loss switching back to train mode, logits.view(-1, V), top-k by in-place assignment of -inf, F.softmax
import torch
import torch.nn.functional as F
from torch import nn


def get_batch(data, batch_size, context_length, generator=None):
    ix = torch.randint(len(data) - context_length, (batch_size,), generator=generator)
    offsets = torch.arange(context_length)
    x = data[ix[:, None] + offsets]
    y = data[ix[:, None] + offsets + 1]
    return x, y


def compute_loss(model, x, y):
    logits = model(x)
    B, T, V = logits.shape
    return F.cross_entropy(logits.view(B * T, V), y.view(B * T))


def train_step(model, optimizer, x, y, grad_clip=1.0):
    model.train()
    loss = compute_loss(model, x, y)
    loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


@torch.no_grad()
def estimate_loss(model, batches):
    model.eval()
    losses = torch.zeros(len(batches))
    for k, (x, y) in enumerate(batches):
        losses[k] = compute_loss(model, x, y).item()
    model.train()
    return losses.double().mean().item()


def train(model, optimizer, train_data, val_data, *, steps, batch_size, grad_clip=1.0, eval_every=100,
          eval_batches=10, generator=None):
    block_size = model.context_length
    out = {"train": [], "val": []}
    for it in range(steps):
        xb, yb = get_batch(train_data, batch_size, block_size, generator)
        out["train"].append(train_step(model, optimizer, xb, yb, grad_clip))
        done = it + 1
        if done % eval_every == 0 or done == steps:
            val = [get_batch(val_data, batch_size, block_size, generator) for _ in range(eval_batches)]
            out["val"].append((done, estimate_loss(model, val)))
    return out


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if not temperature > 0:   # the contract: T -> 0 is argmax, T = 0 is no temperature
        raise ValueError(f"temperature must be positive, got {temperature}")
    model.eval()
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= model.context_length else idx[:, -model.context_length:]
        logits = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx
