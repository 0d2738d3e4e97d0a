#: expect: full
#: about: other tools: windows by unfold, nn.CrossEntropyLoss on transposed logits (b, V, n), model.zero_grad(), clipping over the optimiser's parameter groups, estimate_loss as a mean of a tensor, generate under torch.inference_mode() with a top-k mask built by scatter and torch.distributions.Categorical(logits=...)
import torch
from torch import nn

_criterion = nn.CrossEntropyLoss()


def get_batch(data, batch_size, context_length, generator=None):
    windows = data.unfold(0, context_length + 1, 1)       # every window of context_length + 1 tokens
    rows = windows[torch.randint(windows.size(0), (batch_size,), generator=generator)]
    return rows[:, :-1], rows[:, 1:]


def compute_loss(model, x, y):
    return _criterion(model(x).transpose(1, 2), y)


def train_step(model, optimizer, x, y, grad_clip=1.0):
    model.train()
    model.zero_grad()
    loss = compute_loss(model, x, y)
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    nn.utils.clip_grad_norm_(params, max_norm=grad_clip)
    optimizer.step()
    return float(loss.detach())


def estimate_loss(model, batches):
    model.eval()
    with torch.no_grad():
        values = torch.stack([compute_loss(model, x, y).double() for x, y in batches])
    return values.mean().item()


def train(model, optimizer, train_data, val_data, *, steps, batch_size, grad_clip=1.0, eval_every=100,
          eval_batches=10, generator=None):
    n = model.context_length
    train_losses, val_losses = [], []
    for step in range(1, steps + 1):
        train_losses.append(train_step(model, optimizer, *get_batch(train_data, batch_size, n, generator), grad_clip))
        if step == steps or not step % eval_every:
            held_out = [get_batch(val_data, batch_size, n, generator) for _ in range(eval_batches)]
            val_losses.append((step, estimate_loss(model, held_out)))
    return {"train": train_losses, "val": val_losses}


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if not temperature > 0:   # the contract: T -> 0 is argmax, T = 0 is no temperature
        raise ValueError(f"temperature must be positive, got {temperature}")
    model.eval()
    out = idx
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            logits = model(out[:, -model.context_length:])[:, -1] / temperature
            if top_k is not None:
                values, where = logits.topk(top_k, dim=-1)
                logits = torch.full_like(logits, float("-inf")).scatter(-1, where, values)
            token = torch.distributions.Categorical(logits=logits).sample()
            out = torch.cat([out, token.unsqueeze(-1)], dim=-1)
    return out
