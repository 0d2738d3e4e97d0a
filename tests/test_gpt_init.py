"""Exercise 12's GPT, built as its README builds it, starts where a model
that knows nothing should: its first loss on random tokens is about
log(vocab_size). With nn.Embedding's N(0, 1) tied to the head the logits
start about sqrt(d_model) large and the first loss is far higher (17-18
nats at width 32, 44 at 64); GPT-2's N(0, 0.02) fixes it (README 12, "The
initialisation"; notes/04_gpt.md §3)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from coursekit.loader import load_module
from grader.course import REPO_ROOT
from grader.intake.submissions import assemble

VOCAB = 96
CONTEXT = 32


@pytest.fixture(scope="module")
def gpt(course, tmp_path_factory):
    exercise = course.exercise("12")
    source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
    return load_module(assemble(exercise, source, tmp_path_factory.mktemp("gpt"), course), exercise.module)


def first_loss(gpt, seed: int, d_model: int, tie_weights: bool) -> float:
    torch.manual_seed(seed)
    model = gpt.GPT(VOCAB, CONTEXT, d_model, 4, 2, tie_weights=tie_weights).eval()
    tokens = torch.randint(0, VOCAB, (8, CONTEXT + 1), generator=torch.Generator().manual_seed(100 + seed))
    with torch.no_grad():
        logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).item()


@pytest.mark.parametrize("tie_weights", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("d_model", [32, 64, 256])
def test_the_first_loss_is_about_log_vocab(gpt, d_model, tie_weights):
    losses = [first_loss(gpt, seed, d_model, tie_weights) for seed in range(3)]
    assert all(abs(loss - math.log(VOCAB)) < 0.6 for loss in losses), (losses, math.log(VOCAB))


def test_the_shipped_copies_start_there_too():
    """13 and 14 ship 12's reference: the same file, the same init."""
    reference = (REPO_ROOT / "solutions" / "12_gpt" / "gpt.py").read_bytes()
    for folder in ("13_training", "14_kv_cache"):
        assert (REPO_ROOT / "exercises" / folder / "gpt.py").read_bytes() == reference
