"""Probes for exercise 13's training loop: batches, loss, one step, the
held-out loss, the loop, and a tiny GPT learning real text.

Every probe but :func:`learns_text` trains a :class:`ProbeLM`, the probe's
own small language model, whose weights come from a seed: a submission and
the reference start from the same model, and the model *records* what each
of its forward passes saw (training mode, whether gradients were on, the
input's shape). That is how the checks see ``model.train()``,
``model.eval()`` and ``torch.no_grad()`` at work, whatever code put them there.
"""
from __future__ import annotations

import time
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from coursekit.probes import warm
from coursekit.probes.corpus import VOCAB, decode, splits
from coursekit.probes.modules import own_named_parameters
from coursekit.probes.threads import OneThread


class ProbeLM(nn.Module):
    """Token and position embeddings, dropout, a linear head: logits
    ``(b, n, vocab_size)``. ``scale`` multiplies the logits (a large one
    makes a large gradient). Each forward appends ``{"training", "grad",
    "shape"}`` to ``self.seen``: the dropout layer's mode, whether autograd
    was recording, the input's shape."""

    def __init__(self, vocab_size: int, context_length: int, d_model: int = 8, dropout: float = 0.0,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.context_length = context_length
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, vocab_size)
        self.scale = scale
        self.seen: list[dict] = []

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.seen.append({"training": bool(self.drop.training), "grad": torch.is_grad_enabled(),
                          "shape": list(idx.shape)})
        n = idx.size(1)
        h = self.drop(self.tok(idx) + self.pos(torch.arange(n) % self.context_length))
        return self.scale * self.head(h)


def probe_model(config: dict, seed: int, dtype: torch.dtype = torch.float64) -> ProbeLM:
    """A :class:`ProbeLM` of ``config`` with weights drawn from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ProbeLM(**config)
    return model.to(dtype)


def _parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in own_named_parameters(model)}


def _as_float(value: object) -> float | None:
    """A Python float as returned, else None (a tensor is not what the contract says)."""
    return value if type(value) is float else None


def _values(values: list) -> torch.Tensor:
    """Returned losses as a float64 tensor, NaN where one was not a Python float."""
    return torch.tensor([v if type(v) is float else float("nan") for v in values], dtype=torch.float64)


# --- get_batch -----------------------------------------------------------------

def batches(module: ModuleType, length: int, batch_size: int, context_length: int, draws: int, seed: int) -> dict:
    """``get_batch`` ``draws`` times on data whose values are all different
    (each value tells its position), with a seeded generator: the (x, y)
    pairs as returned (detached; None for what is not a tensor), and the
    data and sizes. The grader draws every fact from them in its own process
    (grader/checks/training.py: batch_facts), never in this one."""
    gen = torch.Generator().manual_seed(seed)
    data = torch.randperm(length, generator=torch.Generator().manual_seed(seed + 1)) + 3
    pairs = []
    for _ in range(draws):
        x, y = module.get_batch(data, batch_size, context_length, generator=gen)
        pairs.append([v.detach().clone() if isinstance(v, torch.Tensor) else None for v in (x, y)])
    return {"pairs": pairs, "data": data, "batch_size": batch_size, "context_length": context_length}


def batch_facts(pairs: list, data: torch.Tensor, batch_size: int, context_length: int) -> dict:
    """What :func:`batches`' pairs show, from the tensors alone: shapes and
    dtypes; whether every row of x is a window of the data, whether y is
    the window one position later (or x itself); whether every start was
    in range and every possible start drawn. The grader computes it in its
    own process from the returned tensors; the public tests here."""
    data, b, n = data.tolist(), batch_size, context_length
    position = {v: i for i, v in enumerate(data)}
    facts = {"shapes": set(), "dtypes": set(), "x_windows": True, "y_next": True, "y_is_x": True, "starts": set()}
    for x, y in pairs:
        if type(x) is not torch.Tensor or type(y) is not torch.Tensor:
            facts["shapes"].add("not tensors")
            facts["x_windows"] = facts["y_next"] = facts["y_is_x"] = False
            continue
        facts["shapes"].add(f"{tuple(x.shape)} {tuple(y.shape)}")
        facts["dtypes"].add(f"{x.dtype} {y.dtype}")
        if tuple(x.shape) != (b, n) or y.shape != x.shape:
            facts["x_windows"] = facts["y_next"] = facts["y_is_x"] = False
            continue
        facts["y_is_x"] &= bool(torch.equal(x, y))
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            start = position.get(row_x[0], -1)
            facts["starts"].add(start)
            facts["x_windows"] &= start >= 0 and row_x == data[start:start + n]
            facts["y_next"] &= start >= 0 and row_y == data[start + 1:start + 1 + n]
    valid = set(range(len(data) - n))
    return {"shapes": sorted(facts["shapes"]), "dtypes": sorted(facts["dtypes"]), "x_windows": facts["x_windows"],
            "y_next": facts["y_next"], "y_is_x": facts["y_is_x"], "starts_in_range": facts["starts"] <= valid,
            "every_start_drawn": facts["starts"] >= valid}


# --- compute_loss --------------------------------------------------------------

def loss(module: ModuleType, config: dict, seed: int, x: torch.Tensor, y: torch.Tensor) -> dict:
    """``compute_loss`` on a seeded :class:`ProbeLM` (float64, eval mode):
    the loss, whether it is a scalar tensor, the gradients it gives, and
    whether it equals the mean cross-entropy of the logits against y (and,
    to name a mistake, against x)."""
    model = probe_model(config, seed).eval()
    value = module.compute_loss(model, x, y)
    scalar = isinstance(value, torch.Tensor) and value.dim() == 0
    grads = {}
    if scalar and value.requires_grad:
        value.backward()
        grads = {name: None if p.grad is None else p.grad.clone() for name, p in own_named_parameters(model)}
    with torch.no_grad():
        logits = model(x).flatten(0, 1)
    return {"loss": value.detach() if scalar else None, "scalar": scalar, "grads": grads,
            "is_ce_of_y": scalar and bool(torch.allclose(value.detach(), F.cross_entropy(logits, y.flatten()))),
            "is_ce_of_x": scalar and bool(torch.allclose(value.detach(), F.cross_entropy(logits, x.flatten())))}


# --- train_step ----------------------------------------------------------------

def steps(module: ModuleType, config: dict, seed: int, batches: list, lr: float, grad_clip: float) -> dict:
    """``train_step`` once per (x, y) in ``batches`` with plain SGD on a
    seeded :class:`ProbeLM` (float64) left in eval mode beforehand, as
    ``estimate_loss`` leaves it. The losses returned, the parameters after
    each step (gradients left over from an earlier step, or no clipping,
    show there), and the dropout mode of each forward pass."""
    model = probe_model(config, seed).eval()
    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    losses, after = [], []
    # Dropout's masks seeded: a step in training mode drops the same units
    # as the reference's, and one in eval mode shows in the parameters.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for x, y in batches:
            losses.append(_as_float(module.train_step(model, optimiser, x, y, grad_clip)))
            after.append(_parameters(model))
    return {"losses": _values(losses), "floats": all(v is not None for v in losses), "parameters": after,
            "training": [seen["training"] for seen in model.seen],
            "grad": [seen["grad"] for seen in model.seen]}


# --- estimate_loss -------------------------------------------------------------

def estimate(module: ModuleType, config: dict, seed: int, batches: list) -> dict:
    """``estimate_loss`` on a seeded :class:`ProbeLM` with dropout, left in
    training mode beforehand (as ``train_step`` leaves it): the value (NaN
    when it is not a Python float), and the mode and gradient recording of
    each forward pass."""
    model = probe_model(config, seed).train()
    value = module.estimate_loss(model, batches)
    return {"loss": _values([value]), "training": [seen["training"] for seen in model.seen],
            "grad": [seen["grad"] for seen in model.seen]}


# --- train ---------------------------------------------------------------------

def periodic_text(vocab_size: int, period: int, length: int, seed: int) -> torch.Tensor:
    """A text whose next token follows from the current one: ``period``
    different tokens repeated (a bigram model can learn it to loss ~0)."""
    cycle = torch.randperm(vocab_size, generator=torch.Generator().manual_seed(seed))[:period]
    return cycle.repeat(length // period + 1)[:length]


def loop(module: ModuleType, config: dict, seed: int, steps: int, batch_size: int, eval_every: int,
         eval_batches: int, lr: float = 0.1) -> dict:
    """``train`` with Adam on a seeded float64 :class:`ProbeLM` and a
    periodic text (the held-out split is the same cycle, later). Facts: how
    many train losses came back and after which steps a held-out loss was
    measured, whether training brought the held-out loss (measured by
    :func:`heldout_loss`, not by the submission) below a tenth of its start, and which (mode, gradients) combinations and input shapes
    the forward passes saw."""
    model = probe_model(config, seed)
    text = periodic_text(config["vocab_size"], config["vocab_size"] - 1, 600, seed)
    train_data, val_data = text[:500], text[500:]
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    with torch.no_grad():
        start = F.cross_entropy(model.eval()(val_data[None, :config["context_length"]])[0],
                                val_data[1:config["context_length"] + 1]).item()
    model.seen.clear()
    # float64, the batches drawn from the generator and dropout's masks from
    # the global generator, both seeded: a loop that steps the optimiser as
    # the contract says ends with the reference's weights, which the grader
    # compares ("parameters"). Weights written any other way (a bigram
    # table) do not; the facts below may only take points away.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        history = module.train(model, optimiser, train_data, val_data, steps=steps, batch_size=batch_size,
                               eval_every=eval_every, eval_batches=eval_batches,
                               generator=torch.Generator().manual_seed(seed))
    parameters = _parameters(model)
    val = history.get("val", []) if isinstance(history, dict) else []
    train_losses = history.get("train", []) if isinstance(history, dict) else []
    # The probe's own measure, with the next token as target: a loop whose
    # batches are wrong can report a low loss of its own.
    seen = list(model.seen)
    final = heldout_loss(model, val_data, config["context_length"], windows=16)
    return {"parameters": parameters, "n_train": len(train_losses),
            "train_floats": all(type(v) is float for v in train_losses),
            "val_steps": [int(entry[0]) for entry in val if isinstance(entry, (tuple, list)) and len(entry) == 2],
            "learned": final < start / 10,
            "modes": sorted({f"training={s['training']} grad={s['grad']}" for s in seen}),
            "shapes": sorted({str(s["shape"]) for s in seen})}


# --- a tiny GPT on real text -----------------------------------------------------

GPT_CONFIG = {"context_length": 32, "d_model": 32, "num_heads": 4, "num_layers": 2, "dropout": 0.0}
TRAIN_CONFIG = {"steps": 200, "batch_size": 32, "grad_clip": 1.0, "eval_every": 100, "eval_batches": 8}
LEARNING_RATE = 1e-2


@torch.no_grad()
def heldout_loss(model: nn.Module, data: torch.Tensor, context_length: int, windows: int = 128) -> float:
    """Mean next-token cross-entropy of ``model`` (eval mode) over the first
    ``windows`` non-overlapping windows of ``data``."""
    windows = min(windows, (len(data) - 1) // context_length)
    starts = range(0, windows * context_length, context_length)
    x = torch.stack([data[s:s + context_length] for s in starts])
    y = torch.stack([data[s + 1:s + 1 + context_length] for s in starts])
    logits = model.eval()(x)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()


def learns_text(module: ModuleType, gpt_module: ModuleType, seed: int = 0) -> dict:
    """Train ``gpt_module.GPT`` (:data:`GPT_CONFIG`) with ``module.train``
    (:data:`TRAIN_CONFIG`, AdamW) on the standard library's source
    (:mod:`coursekit.probes.corpus`), one thread. The history, the
    held-out loss before training, the seconds it took, and a sample of
    ``generate`` from the first characters of the held-out text; and the
    probe's own measure of the held-out loss after training
    (:func:`heldout_loss`), which does not rely on the submission's batches."""
    train_data, val_data = splits()
    gen = torch.Generator().manual_seed(seed)
    with OneThread():   # a tiny model: a second thread costs more than it saves
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = gpt_module.GPT(vocab_size=len(VOCAB), **GPT_CONFIG)
        optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
        with torch.no_grad():
            x = val_data[:GPT_CONFIG["context_length"]][None]
            y = val_data[1:GPT_CONFIG["context_length"] + 1]
            initial = F.cross_entropy(model.eval()(x)[0], y).item()
        started = time.perf_counter()
        history = module.train(model, optimiser, train_data, val_data, generator=gen, **TRAIN_CONFIG)
        seconds = time.perf_counter() - started
        heldout = heldout_loss(model, val_data, GPT_CONFIG["context_length"])
        prompt = val_data[:16][None]
        sample = module.generate(model, prompt, 48, temperature=0.8, top_k=10, generator=gen)
    return {"history": history, "initial": initial, "heldout": heldout, "seconds": seconds,
            "prompt": decode(prompt[0]), "sample": decode(sample[0, prompt.size(1):])}


warm.optimizers()  # its calls step optimisers: paid in the server, before a child (see warm)
