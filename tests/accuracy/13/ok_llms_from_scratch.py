#: expect: full
#: about: LLMs-from-scratch's style: calc_loss_batch with flatten(0, 1), a loader-like list of batches, torch.where for top-k with a min_val, temperature then softmax then multinomial, helpers of its own, aliased imports
import torch as T
import torch.nn.functional as nnf


def get_batch(data, batch_size, context_length, generator=None):
    starts = T.randint(0, data.numel() - context_length, (batch_size,), generator=generator)
    inputs, targets = [], []
    for s in starts:
        chunk = data[s:s + context_length + 1]
        inputs.append(chunk[:-1])
        targets.append(chunk[1:])
    return T.stack(inputs), T.stack(targets)


def calc_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)
    return nnf.cross_entropy(logits.flatten(0, 1), target_batch.flatten())


def compute_loss(model, x, y):
    return calc_loss_batch(x, y, model)


def train_step(model, optimizer, x, y, grad_clip=1.0):
    model.train()
    optimizer.zero_grad()
    loss = calc_loss_batch(x, y, model)
    loss.backward()
    T.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
    optimizer.step()
    return loss.item()


def calc_loss_loader(batches, model):
    total = 0.0
    for input_batch, target_batch in batches:
        total += calc_loss_batch(input_batch, target_batch, model).item()
    return total / len(batches)


def estimate_loss(model, batches):
    model.eval()
    with T.no_grad():
        loss = calc_loss_loader(batches, model)
    model.train()
    return loss


def train(model, optimizer, train_data, val_data, *, steps, batch_size, grad_clip=1.0, eval_every=100,
          eval_batches=10, generator=None):
    track = {"train": [], "val": []}
    ctx = model.context_length
    global_step = 0
    while global_step < steps:
        input_batch, target_batch = get_batch(train_data, batch_size, ctx, generator)
        track["train"].append(train_step(model, optimizer, input_batch, target_batch, grad_clip))
        global_step += 1
        if global_step % eval_every == 0 or global_step == steps:
            loader = [get_batch(val_data, batch_size, ctx, generator) for _ in range(eval_batches)]
            track["val"].append((global_step, estimate_loss(model, loader)))
    return track


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if not temperature > 0:   # the contract: T -> 0 is argmax, T = 0 is no temperature
        raise ValueError(f"temperature must be positive, got {temperature}")
    model.eval()
    context_size = model.context_length
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -context_size:]
        with T.no_grad():
            logits = model(idx_cond)
        logits = logits[:, -1, :]
        if top_k is not None:
            top_logits, _ = T.topk(logits, top_k)
            min_val = top_logits[:, -1]
            logits = T.where(logits < min_val[:, None], T.tensor(float("-inf")), logits)
        logits = logits / temperature
        probs = T.softmax(logits, dim=-1)
        idx_next = T.multinomial(probs, num_samples=1, generator=generator)
        idx = T.cat((idx, idx_next), dim=1)
    return idx
