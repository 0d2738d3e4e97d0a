"""Public tests for exercise 03. Run: pytest exercises/03_masking

The oracle is PyTorch's own F.scaled_dot_product_attention. Its attn_mask
is True where attention is ALLOWED, the opposite of this course's masks:
that is why the oracle below passes ``~mask``.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coursekit import expect
from coursekit.compare import compare_tensors
from coursekit.probes.masking import (
    attention_gradients,
    attention_output,
    causal_mask_output,
    dropout_usage,
    padding_mask_output,
)

T, F_ = True, False
SCORE_PITFALLS = ["missing-scale", "scale-by-d", "softmax-wrong-dim"]
MASK_PITFALLS = ["mask-inverted", "mask-after-softmax"]


# --- helpers: inputs, oracles, and which known mistake a result looks like ---

def qkv(batch, n_q, n_k, d_k, d_v, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*batch, n, d, generator=gen).to(dtype) for n, d in [(n_q, d_k), (n_k, d_k), (n_k, d_v)])


def oracle(q, k, v, mask=None, scale=None):
    """(output, weights) from F.scaled_dot_product_attention. The weights are
    its output when every key's value is a one-hot vector (identity matrix)."""
    allowed = None if mask is None else ~mask
    n_k = k.size(-2)
    identity = torch.eye(n_k, dtype=q.dtype).expand(*k.shape[:-2], n_k, n_k)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)
    weights = F.scaled_dot_product_attention(q, k, identity, attn_mask=allowed, scale=scale)
    return output, weights


def _same(actual, expected):
    return (type(actual) is torch.Tensor and actual.shape == expected.shape
            and torch.allclose(actual.detach(), expected, atol=1e-4, rtol=1e-3))


def likely_pitfalls(weights, q, k, mask=None):
    """The known mistakes whose result these weights reproduce, if any."""
    if type(weights) is not torch.Tensor:
        return []
    # softmax over the queries = the transpose of attention from keys to queries
    by_query = oracle(k, q, q, None if mask is None else mask.transpose(-2, -1))[1].transpose(-2, -1)
    if _same(weights.nan_to_num(0.0), by_query):
        return ["softmax-wrong-dim"]
    if weights.isnan().any():
        return ["softmax-all-masked-nan"]
    n_k, d_k = k.size(-2), q.size(-1)
    found = []
    for pitfall, scale in [("missing-scale", 1.0), ("scale-by-d", 1.0 / d_k)]:
        if _same(weights, oracle(q, k, k, mask, scale=scale)[1]):
            found.append(pitfall)
    if mask is not None:
        correct = oracle(q, k, k, mask)[1]
        if _same(weights, oracle(q, k, k, ~mask)[1]):
            found.append("mask-inverted")
        if _same(weights, oracle(q, k, k)[1].masked_fill(mask, 0.0)):
            found.append("mask-after-softmax")
        fully_blocked = torch.broadcast_to(mask, correct.shape).all(dim=-1, keepdim=True)
        if fully_blocked.any() and _same(weights, correct.masked_fill(fully_blocked, 1.0 / n_k)):
            found.append("mask-minus-1e9")  # fully blocked rows attend uniformly
    return found


def close(actual, expected, *, what, diagnose=list, **tolerance):
    """expect.close; ``diagnose()`` runs extra attention calls, only on failure."""
    expect.close(actual, expected, what=what, diagnose=diagnose, **tolerance)


def expect_pair(result, what):
    """scaled_dot_product_attention returned (output, weights), two tensors."""
    expect.that(type(result["output"]) is torch.Tensor and type(result["weights"]) is torch.Tensor,
                what=f"{what}: the value returned", expected="a pair (output, weights) of tensors",
                actual=f"a {type(result['output']).__name__} for the output, "
                       f"a {type(result['weights']).__name__} for the weights")


def expect_attention(result, q, k, v, mask=None, *, what, atol=1e-5, rtol=1e-4):
    """The student's (output, weights) equal the oracle's; on failure, name
    the mistake the result looks like (or the usual suspects)."""
    expect_pair(result, what)
    output, weights = oracle(q, k, v, mask)
    def diagnose():
        return likely_pitfalls(result["weights"], q, k, mask) or expect.Guesses(SCORE_PITFALLS + (MASK_PITFALLS if mask is not None else []))
    close(result["weights"], weights, what=f"{what}: the weights", diagnose=diagnose, atol=atol, rtol=rtol)
    close(result["output"], output, what=f"{what}: the output", diagnose=diagnose, atol=atol, rtol=rtol)


def causal_spec(n):
    """The definition: query i may not look at key j when j > i."""
    return [[j > i for j in range(n)] for i in range(n)]


def mask_pitfalls(got):
    """mask-off-by-one when the diagonal is blocked, mask-inverted when the past is."""
    if type(got) is not torch.Tensor or got.dim() != 2 or got.size(0) != got.size(1):
        return []
    below = got.bool().tril(-1)
    return ["mask-inverted"] if below.any() else ["mask-off-by-one"] if got.bool().diagonal().any() else []


def inverted_pitfall(got, expected):
    """mask-inverted when the mask is True exactly where it should be False."""
    flipped = [[not entry for entry in row] for row in expected]
    return ["mask-inverted"] if type(got) is torch.Tensor and got.tolist() == flipped else []


def expect_bool_mask(got, shape, what):
    expect.that(type(got) is torch.Tensor and got.dtype == torch.bool, what=f"{what}: the type",
                expected="a torch.bool tensor", actual=f"{getattr(got, 'dtype', type(got).__name__)}")
    expect.shape(got, shape, what=f"{what}: the shape")


# --- causal_mask ---

def test_causal_mask_of_four_tokens(student):
    got = causal_mask_output(student, 4)
    expect_bool_mask(got, (4, 4), "causal_mask(4)")
    expect.equal(got.tolist(), [[F_, T, T, T], [F_, F_, T, T], [F_, F_, F_, T], [F_, F_, F_, F_]],
                 what="causal_mask(4): True strictly above the diagonal", pitfalls=mask_pitfalls(got))


@pytest.mark.parametrize("seq_len", [1, 2, 7])
def test_causal_mask_sizes(student, seq_len):
    got = causal_mask_output(student, seq_len)
    expect_bool_mask(got, (seq_len, seq_len), f"causal_mask({seq_len})")
    expect.equal(got.tolist(), causal_spec(seq_len), what=f"causal_mask({seq_len}): [i, j] is True exactly when j > i",
                 pitfalls=mask_pitfalls(got))


def test_causal_mask_accepts_a_device(student):
    # Later exercises build masks next to their inputs: causal_mask(n, device=x.device).
    for device in ["cpu", torch.device("cpu")]:
        got = causal_mask_output(student, 3, device=device)
        expect_bool_mask(got, (3, 3), f"causal_mask(3, device={device!r})")
        expect.equal(got.device.type, "cpu", what=f"the device of causal_mask(3, device={device!r})")
        expect.equal(got.tolist(), causal_spec(3), what=f"causal_mask(3, device={device!r})", pitfalls=mask_pitfalls(got))


# --- padding_mask ---

def test_padding_mask_example(student):
    result = padding_mask_output(student, [3, 1, 4], 4)
    expect_bool_mask(result["mask"], (3, 4), "padding_mask([3, 1, 4], 4)")
    expected = [[F_, F_, F_, T], [F_, T, T, T], [F_, F_, F_, F_]]
    expect.equal(result["mask"].tolist(), expected, what="padding_mask([3, 1, 4], 4): True at positions >= the length",
                 pitfalls=inverted_pitfall(result["mask"], expected))


def test_padding_mask_from_a_tensor_with_an_empty_sequence(student):
    lengths = torch.tensor([0, 2, 5, 1])
    result = padding_mask_output(student, lengths, 5)
    expect_bool_mask(result["mask"], (4, 5), "padding_mask(tensor([0, 2, 5, 1]), 5)")
    expected = [[position >= length for position in range(5)] for length in [0, 2, 5, 1]]
    expect.equal(result["mask"].tolist(), expected, what="padding_mask(tensor([0, 2, 5, 1]), 5); length 0 is all padding",
                 pitfalls=inverted_pitfall(result["mask"], expected))
    expect.that(result["lengths_unchanged"], what="the lengths tensor after the call",
                expected="unchanged", actual="modified in place")


# --- scaled_dot_product_attention ---

SHAPES = [
    pytest.param((), 3, 5, 4, 2, id="unbatched"),
    pytest.param((2,), 3, 5, 4, 6, id="batch-nq!=nk-dv!=dk"),
    pytest.param((2, 3), 4, 4, 8, 8, id="batch-heads"),
]


@pytest.mark.parametrize("batch,n_q,n_k,d_k,d_v", SHAPES)
def test_attention_matches_torch(student, batch, n_q, n_k, d_k, d_v):
    q, k, v = qkv(batch, n_q, n_k, d_k, d_v, seed=10)
    result = attention_output(student, q, k, v)
    expect.shape(result["output"], (*batch, n_q, d_v), what=f"output shape for query {tuple(q.shape)}, value {tuple(v.shape)}")
    expect_attention(result, q, k, v, what=f"attention for query {tuple(q.shape)}, key {tuple(k.shape)}")


def test_masked_weights_are_zero_and_rows_sum_to_one(student):
    q, k, v = qkv((2,), 4, 6, 8, 3, seed=11)
    mask = torch.rand(2, 4, 6, generator=torch.Generator().manual_seed(12)) < 0.5
    mask[..., 2] = False  # every query keeps at least one key
    result = attention_output(student, q, k, v, mask)
    expect_pair(result, "attention with a random mask")
    weights = result["weights"]
    expect.shape(weights, (2, 4, 6), what="the weights for (2, 4, 8) queries and (2, 6, 8) keys")
    zero_where_blocked = type(weights) is torch.Tensor and bool((weights[mask] == 0).all())
    expect.that(zero_where_blocked, what="weights at blocked positions (mask True)", expected="exactly 0",
                actual="non-zero weights where the mask is True" if type(weights) is torch.Tensor else "no weights",
                pitfalls=[] if zero_where_blocked else likely_pitfalls(weights, q, k, mask) or ["mask-inverted"])
    close(weights.sum(dim=-1), torch.ones(2, 4), what="each query's weights sum to one (sum over the keys, dim=-1)",
          diagnose=lambda: likely_pitfalls(weights, q, k, mask) or expect.Guesses(["mask-after-softmax", "softmax-wrong-dim"]))
    expect_attention(result, q, k, v, mask, what="attention with a random mask")


def test_causal_attention_matches_torch(student):
    q, k, v = qkv((2, 2), 5, 5, 4, 3, seed=13)
    mask = causal_mask_output(student, 5)
    result = attention_output(student, q, k, v, mask)
    expect_bool_mask(mask, (5, 5), "causal_mask(5)")
    expect_pair(result, "causal attention")
    expect.equal(mask.tolist(), causal_spec(5), what="causal_mask(5) used for this test", pitfalls=mask_pitfalls(mask))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    close(result["output"], expected, what="causal attention, compared with F.scaled_dot_product_attention(is_causal=True)",
          diagnose=lambda: likely_pitfalls(result["weights"], q, k, mask) or expect.Guesses(SCORE_PITFALLS + MASK_PITFALLS))


def test_seed_001_causal_weights(student):
    # Seed 001, section 2.4, prints these causal scores (6 tokens, d_k = 2)
    # and the weights softmax(scores / sqrt(2)). With key = value = identity
    # (d_k = 6) and query = scores * sqrt(6) / sqrt(2), your function must
    # reproduce those weights. The scores above the diagonal are made large:
    # if they leak through the mask, the result changes a lot.
    lower = [[0.2899], [0.4656, 0.1723], [0.4594, 0.1703, 0.1731], [0.2642, 0.1024, 0.1036, 0.0186],
             [0.2183, 0.0874, 0.0882, 0.0177, 0.0786], [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]]
    scores = torch.tensor([row + [5.0] * (6 - len(row)) for row in lower])
    expected = torch.tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
                             [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
                             [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
                             [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
                             [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
                             [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])
    mask = causal_mask_output(student, 6)
    q = scores * math.sqrt(6) / math.sqrt(2)
    result = attention_output(student, q, torch.eye(6), torch.eye(6), mask)
    expect_bool_mask(mask, (6, 6), "causal_mask(6)")
    expect_pair(result, "the README's causal worked example")
    close(result["weights"], expected, what="the causal weights printed in the README's worked example", atol=1.5e-4,
          diagnose=lambda: mask_pitfalls(mask) or likely_pitfalls(result["weights"], q, torch.eye(6), mask)
          or expect.Guesses(SCORE_PITFALLS + MASK_PITFALLS))


def test_padding_mask_broadcasts_over_heads_and_queries(student):
    q, k, v = qkv((2, 2), 3, 5, 4, 3, seed=14)
    mask = torch.tensor([[F_, F_, F_, F_, F_], [F_, F_, T, T, T]])[:, None, None, :]  # (batch, 1, 1, n_k)
    result = attention_output(student, q, k, v, mask)
    expect_attention(result, q, k, v, mask, what="attention with a (2, 1, 1, 5) padding mask on (2, 2, 3, 5) scores")


FULLY_BLOCKED = [
    pytest.param(torch.tensor([[[F_, T, F_, T], [T, T, T, T], [F_, F_, F_, T]],
                               [[T, T, T, T], [F_, F_, T, T], [T, F_, F_, F_]]]), id="one-row-per-batch"),
    pytest.param(torch.tensor([[F_, F_, F_, F_], [T, T, T, T]])[:, None, :], id="empty-sequence"),
]


@pytest.mark.parametrize("mask", FULLY_BLOCKED)
def test_fully_blocked_rows_give_zeros_not_nan(student, mask):
    q, k, v = qkv((2,), 3, 4, 4, 5, seed=15)
    result = attention_output(student, q, k, v, mask)
    expect_attention(result, q, k, v, mask,
                     what="a query whose keys are all blocked gets zero weights and a zero output")


@pytest.mark.parametrize("mask", FULLY_BLOCKED)
def test_gradients_match_torch_with_fully_blocked_rows(student, mask):
    q, k, v = qkv((2,), 3, 4, 4, 5, seed=16)
    upstream = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(17))
    grads = attention_gradients(student, q, k, v, upstream, mask)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    (F.scaled_dot_product_attention(*leaves, attn_mask=~mask) * upstream).sum().backward()
    for name, leaf in zip(["query", "key", "value"], leaves):
        got = grads[name]
        expect.that(type(got) is torch.Tensor and bool(got.isfinite().all()), what=f"gradient of the {name}",
                    expected="finite everywhere", actual="NaN or inf" if type(got) is torch.Tensor else "no gradient",
                    pitfalls=["softmax-all-masked-nan"])
        close(got, leaf.grad, what=f"gradient of the {name}, compared with F.scaled_dot_product_attention",
              diagnose=lambda: likely_pitfalls(attention_output(student, q, k, v, mask)["weights"], q, k, mask))


def test_float16_with_a_mask(student):
    q, k, v = qkv((2,), 3, 4, 8, 4, seed=18, dtype=torch.float16)
    mask = torch.tensor([[F_, T, F_, T], [T, T, T, T], [F_, F_, F_, T]])
    error = None
    try:
        result = attention_output(student, q, k, v, mask)
    except RuntimeError as exc:  # NotImplementedError is one too: let it through
        if "overflow" not in str(exc):
            raise
        error = str(exc)
    expect.that(error is None, what="attention on float16 inputs with a mask",
                expected="blocked scores filled with -inf (float16 holds -inf, but not -1e9)",
                actual=f"RuntimeError: {error}", pitfalls=["mask-minus-1e9"])
    expect_pair(result, "attention on float16 inputs")
    output, weights = oracle(q.float(), k.float(), v.float(), mask)
    def diagnose():
        return likely_pitfalls(result["weights"].float(), q.float(), k.float(), mask)
    close(result["weights"], weights.half(), what="float16 weights (dtype kept)", atol=2e-3, rtol=1e-2, diagnose=diagnose)
    close(result["output"], output.half(), what="float16 output (dtype kept)", atol=2e-3, rtol=1e-2, diagnose=diagnose)


def test_float64_keeps_dtype_and_precision(student):
    q, k, v = qkv((2,), 3, 5, 4, 2, seed=19, dtype=torch.float64)
    mask = torch.tensor([[F_, T, F_, F_, T], [F_, F_, F_, F_, F_], [T, T, F_, T, T]])
    result = attention_output(student, q, k, v, mask)
    expect_attention(result, q, k, v, mask, what="attention on float64 inputs", atol=1e-10, rtol=1e-9)


# --- dropout ---

def test_dropout_is_applied_once_to_the_weights_after_softmax(student):
    # A stand-in "dropout" module that halves its input and records it.
    q, k, v = qkv((2,), 3, 4, 4, 5, seed=20)
    mask = torch.tensor([[F_, T, F_, T], [F_, F_, F_, F_], [F_, F_, T, T]])
    usage = dropout_usage(student, q, k, v, mask)
    expect_pair(usage, "attention with a dropout module")
    output, weights = oracle(q, k, v, mask)
    expect.equal(usage["calls"], 1, what="how many times the dropout module was called")
    close(usage["seen"], weights, what="what the dropout module was given: the weights after the softmax",
          diagnose=lambda: likely_pitfalls(usage["seen"], q, k, mask))
    expect.close(usage["output"], output * 0.5, what="the output: the weights after dropout times the values",
                 pitfalls=["dropout-typo"] if _same(usage["output"], output) else [])
    expect.close(usage["weights"], weights * 0.5,
                 what="the weights returned: those after dropout (the ones multiplied with the values)")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_dropout_matches_nn_dropout(student, train):
    q, k, v = qkv((2, 2), 4, 6, 8, 3, seed=21)
    mask = torch.tensor(causal_spec(6))[:4]  # the first 4 rows of a causal mask: (n_q, n_k) = (4, 6)
    result = attention_output(student, q, k, v, mask, dropout_p=0.5, train=train, seed=123)
    expect_pair(result, f"attention with nn.Dropout(0.5) in {'train' if train else 'eval'} mode")
    _, weights = oracle(q, k, v, mask)
    dropout = nn.Dropout(0.5).train(train)
    torch.manual_seed(123)
    dropped = dropout(weights)
    def diagnose():
        # Wrong weights before dropout point to the usual suspects; right ones
        # that dropout left untouched in training mode, to a lost dropout result.
        pitfalls = likely_pitfalls(attention_output(student, q, k, v, mask)["weights"], q, k, mask)
        if not pitfalls and train and _same(result["weights"], weights):
            pitfalls = ["dropout-typo"]
        return pitfalls
    mode = "train" if train else "eval"
    close(result["weights"], dropped, what=f"weights with nn.Dropout(0.5) in {mode} mode (same seed as nn.Dropout)",
          diagnose=diagnose)
    close(result["output"], dropped @ v, what=f"output with nn.Dropout(0.5) in {mode} mode", diagnose=diagnose)


# --- hygiene ---

def test_does_not_modify_its_inputs(student):
    q, k, v = qkv((2,), 3, 4, 4, 2, seed=22)
    mask = torch.tensor([[F_, T, T, T], [F_, F_, T, T], [F_, F_, F_, T]])
    result = attention_output(student, q, k, v, mask)
    expect.that(result["inputs_unchanged"], what="query, key, value and mask after the call",
                expected="unchanged", actual="modified in place")


def test_uses_no_builtin_attention(student):
    attention_output(student, *qkv((), 2, 2, 2, 2, seed=23))  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write it with matmul, masked_fill and softmax")
