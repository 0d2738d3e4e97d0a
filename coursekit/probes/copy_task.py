"""Probes for exercise 11: train a tiny Transformer on a copy task.

The public training test and the hidden check share :func:`copy_task`:
teacher forcing for a couple of hundred steps, then greedy decoding of new
sequences. Weights come from :func:`coursekit.probes.transformer.init_by_name`,
so a submission and the reference start from the same model (``own_init``
keeps the model's own initialisation instead, as a student's training would).
"""
from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from types import ModuleType

import torch
from torch import nn

from coursekit.probes import warm
from coursekit.probes.attention_record import head_mean, recorded_attention
from coursekit.probes.threads import OneThread
from coursekit.probes.transformer import implicit_softmax, init_by_name

COPY_CONFIG = {"src_vocab": 11, "tgt_vocab": 11, "d_model": 32, "num_heads": 4, "num_encoder_layers": 1,
               "num_decoder_layers": 1, "d_ff": 64, "dropout": 0.0, "max_len": 64, "pad_idx": 0}
PAD, START, END = 0, 1, 2  # tokens 3..10 are the symbols to copy
# Early stopping (copy_task's stop_when): checked every CHECK_EVERY steps;
# training stops when the thresholds hold at HELD checks in a row.
CHECK_EVERY, HELD = 10, 2


def copy_batch(gen: torch.Generator, batch: int, length: int, vocab: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    """src (batch, length) random symbols; tgt (batch, length + 2) =
    [START, the same symbols, END]."""
    src = torch.randint(END + 1, vocab, (batch, length), generator=gen)
    start = torch.full((batch, 1), START)
    end = torch.full((batch, 1), END)
    return src, torch.cat([start, src, end], dim=1)


def copy_task(module: ModuleType, seed: int = 0, steps: int = 200, batch: int = 32, length: int = 8,
              lr: float = 3e-3, n_test: int = 100, own_init: bool = False,
              stop_when: Sequence[float] | None = None) -> dict:
    """Train a tiny Transformer (``COPY_CONFIG``) to copy its input, with
    teacher forcing and cross-entropy on ``forward``'s output, then
    ``greedy_decode`` ``n_test`` new sequences.

    Returns the training losses, the exact-match rate of the greedy outputs
    (every token and the END right), the per-token accuracy, two example
    (source, output) pairs, the training time in seconds, whether a
    softmax without ``dim`` was called, and the trained model (in eval mode).

    With ``stop_when = (max_final_loss, min_exact_match)`` training stops
    early once both thresholds are met at :data:`HELD` checks in a row,
    :data:`CHECK_EVERY` steps apart (the mean of the last 20 losses, then
    greedy decoding of the test sequences): what a pass is judged on, held,
    not merely touched once. A model that never meets them trains all
    ``steps``, so a failing run costs what it did and is judged the same.

    With ``own_init`` the model keeps the weights its own ``__init__`` drew
    (after ``torch.manual_seed(seed)``) instead of :func:`init_by_name`'s:
    how a student trains a model outside the tests. The tests re-initialise,
    so that the grade does not depend on an initialisation the contract
    leaves open, and a submission and the reference start from the same weights.
    """
    if own_init:
        with torch.random.fork_rng(devices=[]):  # leaves the caller's random state alone
            torch.manual_seed(seed)
            model = module.Transformer(**COPY_CONFIG)
    else:
        model = module.Transformer(**COPY_CONFIG)
        init_by_name(model, seed)
    # foreach: one kernel per step for all ~30 parameters instead of one
    # each; the same arithmetic, ~15 % less training time here.
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), foreach=True)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    train_gen = torch.Generator().manual_seed(1_000 + seed)
    test_src, test_tgt = copy_batch(torch.Generator().manual_seed(999_999 + seed), n_test, length)
    losses = []
    # One thread: for a model this small, threads cost more than they save,
    # and on a busy machine a second thread can make training many times slower.
    with OneThread():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.train()
            started = time.perf_counter()
            out, held = None, 0
            for step in range(1, steps + 1):
                src, tgt = copy_batch(train_gen, batch, length)
                logits = model(src, tgt[:, :-1])  # position t predicts tgt[:, t + 1]
                loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(float(loss))
                if stop_when is not None and step % CHECK_EVERY == 0 and step >= 20:
                    out, met = _thresholds_met(model, losses, test_src, test_tgt, length, stop_when)
                    held = held + 1 if met else 0
                    if held >= HELD:
                        break
                    model.train()
            seconds = time.perf_counter() - started
            if held < HELD:  # trained to the end: decode the final model
                model.eval()
                out = model.greedy_decode(test_src, length + 2, START, END)
    same_shape = isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(test_tgt.shape)
    return {
        "losses": losses,
        "exact_match": float((out == test_tgt).all(dim=1).float().mean()) if same_shape else 0.0,
        "token_accuracy": float((out == test_tgt)[:, 1:].float().mean()) if same_shape else 0.0,
        "examples": [(test_src[i].tolist(), out[i].tolist() if same_shape else None) for i in range(2)],
        "output_shape": list(out.shape) if isinstance(out, torch.Tensor) else None,
        "seconds": seconds,
        "implicit_softmax": implicit_softmax(caught),
        "model": model,
    }


def _thresholds_met(model: nn.Module, losses: list[float], test_src: torch.Tensor, test_tgt: torch.Tensor,
                    length: int, stop_when: Sequence[float]) -> tuple[torch.Tensor | None, bool]:
    """One early-stopping check: (greedy outputs or None, whether the mean
    of the last 20 losses and the exact-match rate both meet ``stop_when``).
    Decoding (the costly half) runs only once the loss is low enough."""
    max_loss, min_exact = stop_when
    if not sum(losses[-20:]) / 20 <= max_loss:
        return None, False
    model.eval()
    with torch.no_grad():
        out = model.greedy_decode(test_src, length + 2, START, END)
    if not (isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(test_tgt.shape)):
        return out, False
    return out, float((out == test_tgt).all(dim=1).float().mean()) >= min_exact


def teacher_forced_cross_attention(model: nn.Module, symbols: Sequence[int]) -> torch.Tensor | None:
    """One teacher-forced forward pass of a (trained) copy model on the
    source ``symbols``: the decoder's last cross-attention, averaged over
    heads, (len + 1 decoder inputs [START, *symbols], len source positions)
    float64, or None when no softmax of that shape was recorded (a model that
    writes its own softmax). Row t predicts target token t + 1, so a model
    that copies looks at source position t: a diagonal."""
    src = torch.tensor([list(symbols)])
    tgt_in = torch.tensor([[START, *symbols]])  # the decoder's input: END is what the last row predicts
    model.eval()
    maps = recorded_attention(lambda: model(src, tgt_in))
    return head_mean(maps, tgt_in.size(1), src.size(1))


def copy_outcome(module: ModuleType, seed: int, steps: int, length: int, batch: int = 32, n_test: int = 100,
                 figure_source: Sequence[int] | None = None, stop_when: Sequence[float] | None = None) -> dict:
    """:func:`copy_task` summed up: the mean of the last 20 losses, the
    exact-match rate and per-token accuracy of greedy decoding afterwards,
    and the training time (for the record; never compared); ``stop_when``
    as :func:`copy_task`'s.

    With ``figure_source`` (a public input: the student's page draws it),
    also ``cross_attention``: :func:`teacher_forced_cross_attention` of the
    same trained model, taken after the outcome numbers so that the picture
    costs no second training and can neither change nor fail the outcome:
    anything that goes wrong there gives None, and the page shows the
    reference's picture alone."""
    found = copy_task(module, seed=seed, steps=steps, batch=batch, length=length, n_test=n_test,
                      stop_when=stop_when)
    last = found["losses"][-20:]
    outcome = {"final_loss": sum(last) / max(len(last), 1), "exact_match": found["exact_match"],
               "token_accuracy": found["token_accuracy"], "seconds": found["seconds"]}
    if figure_source is not None:
        try:
            outcome["cross_attention"] = teacher_forced_cross_attention(found["model"], figure_source)
        except Exception:  # the student's model, in a picture that is never scored
            outcome["cross_attention"] = None
    return outcome


warm.optimizers()  # its calls step optimisers: paid in the server, before a child (see warm)
