"""Public test for exercise 11: a tiny Transformer must learn to copy.

It trains for a few seconds on the CPU (200 Adam steps, one thread), with
fixed seeds; the reference passes it for every seed we tried. It is a
training test: `pytest exercises/11_transformer` skips it so that the other
tests answer at once. Run it with
pytest exercises/11_transformer --train
or alone: pytest exercises/11_transformer/test_transformer_training.py
"""
import pytest

from coursekit import expect
from coursekit.probes.copy_task import COPY_CONFIG, copy_task

STEPS = 200
MIN_EXACT_MATCH = 0.5  # chance is about 8**-8
MAX_FINAL_LOSS = 0.3   # mean of the last 20 training losses; at the start it is about log(11) = 2.4

pytestmark = pytest.mark.training


def test_a_tiny_transformer_learns_to_copy(student):
    result = copy_task(student, seed=0, steps=STEPS)
    losses = result["losses"]
    final_loss = sum(losses[-20:]) / 20
    curve = ", ".join(f"step {i}: {losses[i - 1]:.2f}" for i in (1, 50, 100, 150, STEPS))
    pitfalls = []
    # Probabilities in [0, 1] fed to CrossEntropyLoss as if they were logits
    # cannot bring the loss below log(1 + 10 / e) = 1.55 with 11 tokens.
    if final_loss > 1.4:
        pitfalls.append("softmax-before-loss")
    if result["implicit_softmax"]:
        pitfalls.append("softmax-implicit-dim")
    expect.that(
        final_loss <= MAX_FINAL_LOSS,
        what=(f"training loss of a {COPY_CONFIG['d_model']}-wide, 1+1-layer Transformer copying 8 random symbols, "
              f"after {STEPS} Adam steps (cross-entropy on model(src, tgt[:, :-1]) against tgt[:, 1:])"),
        expected=f"mean of the last 20 losses <= {MAX_FINAL_LOSS}",
        actual=f"{final_loss:.3f} ({curve})",
        pitfalls=pitfalls,
    )
    expect.that(
        result["exact_match"] >= MIN_EXACT_MATCH,
        what="greedy_decode(src, max_len=10, start_symbol=1, end_symbol=2) on 100 new sequences after training",
        expected=f"at least {MIN_EXACT_MATCH:.0%} copied exactly: [1, the 8 symbols, 2]",
        actual=(f"{result['exact_match']:.0%} exact, {result['token_accuracy']:.0%} of the tokens right; "
                f"output shape {result['output_shape']}; e.g. src {result['examples'][0][0]} -> {result['examples'][0][1]}"),
        pitfalls=pitfalls,
    )
