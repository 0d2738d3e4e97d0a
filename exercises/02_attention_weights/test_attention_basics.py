"""Public tests for exercise 02. Run: pytest exercises/02_attention_weights"""

import pytest
import torch
import torch.nn.functional as F

from coursekit import expect
from coursekit.probes.attention_weights import call, context_gradient, per_example

# Seed 001, section 2.2: "Your journey starts with one step", one 3-d vector per word.
INPUTS = torch.tensor([
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
])
# What the seed prints for the query "journey" (row 1).
JOURNEY_SCORES = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
JOURNEY_CONTEXT = torch.tensor([0.4419, 0.6515, 0.5683])
# (3, 3, 3): batch, tokens and features of the same size, where `.T` raises no error.
BATCH_SHAPES = [(2, 4, 3), (3, 3, 3), (2, 2, 5, 3)]
BATCHED = ["transpose-T-3d", "softmax-wrong-dim"]


def randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def dot_products(x):
    """The definition, one pair of tokens at a time: scores[..., i, j] = dot(x_i, x_j)."""
    flat = x.reshape(-1, *x.shape[-2:])
    out = torch.stack([torch.stack([torch.stack([torch.dot(a, b) for b in m]) for a in m]) for m in flat])
    return out.reshape(*x.shape[:-1], x.shape[-2])


def simplified_attention(x):
    """PyTorch's own attention with scale 1 and the inputs as queries, keys and values."""
    return F.scaled_dot_product_attention(x, x, x, scale=1.0)


# The errors PyTorch raises when `.T` has moved the batch dim of a 3-D tensor.
T_ERRORS = r"must match the size of tensor b|first two dimensions of batch2|shapes cannot be multiplied"


def batched_input(what):
    """A shape error on batched input (when unbatched input works) is the classic `.T` mistake."""
    return expect.no_error(what=what, pitfalls=["transpose-T-3d"], match=T_ERRORS)


def test_scores_of_the_seed_example(student):
    scores = call(student, "attention_scores", INPUTS)["output"]
    expect.shape(scores, (6, 6), what="attention_scores of the README's (6, 3) inputs")
    expect.close(scores[1], JOURNEY_SCORES, atol=1e-4,
                 what="row 1 of attention_scores(inputs): the query 'journey' against the six words (README, worked example)")


def test_scores_are_pairwise_dot_products(student):
    x = randn(5, 4, seed=1)
    expect.close(call(student, "attention_scores", x)["output"], dot_products(x),
                 what="attention_scores of a (5, 4) input: scores[i, j] = dot(x[i], x[j])")


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=str)
def test_scores_of_a_batch(student, shape):
    x = randn(*shape, seed=2)
    what = f"attention_scores of a batch of shape {shape}"
    with batched_input(what):
        result = per_example(student, "attention_scores", x)
    expect.shape(result["batched"], shape[:-1] + shape[-2:-1], what=what, pitfalls=["transpose-T-3d"])
    expect.close(result["batched"], result["per_example"], pitfalls=["transpose-T-3d"],
                 what=f"{what}, compared with calling it on each (n, d) example separately")
    expect.close(result["batched"], dot_products(x), what=what)


def test_weights_match_torch_softmax(student):
    scores = 2 * randn(4, 6, seed=3)
    expect.close(call(student, "attention_weights", scores)["output"], torch.softmax(scores, dim=-1),
                 what="attention_weights of (4, 6) scores, some of them negative", pitfalls=["normalize-by-sum"])


def test_weights_are_probabilities(student):
    # The last row sums to zero: dividing by the sum cannot work there.
    scores = torch.tensor([[-1.0, 0.5, 2.0], [-3.0, -2.0, -1.0], [0.3, -0.3, 0.0]])
    weights = call(student, "attention_weights", scores)["output"]
    ok = (type(weights) is torch.Tensor and weights.shape == scores.shape and bool(torch.isfinite(weights).all())
          and bool((weights >= 0).all()) and torch.allclose(weights.sum(-1), torch.ones(3)))
    expect.that(ok, what="attention_weights of scores with negative entries (one row sums to zero)",
                expected="finite weights >= 0, each row summing to one",
                actual=f"{weights.tolist() if isinstance(weights, torch.Tensor) else weights!r}",
                pitfalls=["normalize-by-sum"])


def test_weights_of_batched_scores(student):
    scores = randn(2, 3, 4, 4, seed=4)
    weights = call(student, "attention_weights", scores)["output"]
    expect.shape(weights, (2, 3, 4, 4), what="attention_weights of (2, 3, 4, 4) scores")
    expect.close(weights.sum(-1), torch.ones(2, 3, 4), pitfalls=["softmax-wrong-dim"],
                 what="row sums (over the last dim, the keys) of attention_weights of (2, 3, 4, 4) scores")
    expect.close(weights, torch.softmax(scores, dim=-1), what="attention_weights of (2, 3, 4, 4) scores",
                 pitfalls=["normalize-by-sum"])


def test_context_vector_of_journey(student):
    context = call(student, "context_vectors", INPUTS)["output"]
    expect.shape(context, (6, 3), what="context_vectors of the README's (6, 3) inputs")
    expect.close(context[1], JOURNEY_CONTEXT, atol=1e-4, pitfalls=["normalize-by-sum"],
                 what="row 1 of context_vectors(inputs): z for the query 'journey' (README, worked example)")
    expect.close(context, simplified_attention(INPUTS), what="context_vectors of the README's six words")


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=str)
def test_context_vectors_of_a_batch(student, shape):
    x = randn(*shape, seed=5)
    what = f"context_vectors of a batch of shape {shape}"
    with batched_input(what):
        result = per_example(student, "context_vectors", x)
    expect.shape(result["batched"], shape, what=what, pitfalls=BATCHED)
    expect.close(result["batched"], result["per_example"], pitfalls=BATCHED,
                 what=f"{what}, compared with calling it on each (n, d) example separately")
    expect.close(result["batched"], simplified_attention(x), what=what, pitfalls=["normalize-by-sum"])


def test_context_gradient_matches_torch(student):
    x, upstream = randn(2, 4, 3, seed=6), randn(2, 4, 3, seed=7)
    with batched_input("gradient of context_vectors for a (2, 4, 3) batch"):
        grad = context_gradient(student, x, upstream)
    x_ref = x.clone().requires_grad_(True)
    (simplified_attention(x_ref) * upstream).sum().backward()
    expect.close(grad, x_ref.grad, what="gradient of context_vectors with respect to its (2, 4, 3) input")


def test_keeps_float64(student):
    x = randn(2, 3, 4, seed=8, dtype=torch.float64)
    with batched_input("context_vectors of a float64 (2, 3, 4) batch"):
        context = call(student, "context_vectors", x)["output"]
    expect.close(context, simplified_attention(x), what="context_vectors of a float64 (2, 3, 4) batch")


@pytest.mark.parametrize("name", ["attention_scores", "attention_weights", "context_vectors"])
def test_does_not_modify_its_input(student, name):
    x = randn(4, 3, seed=9)
    expect.that(call(student, name, x)["input_unchanged"], what=f"the input tensor after {name}(x)",
                expected="unchanged", actual="modified in place")


def test_uses_no_builtin_attention(student):
    call(student, "context_vectors", INPUTS)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="compute scores, weights and context vectors yourself")
