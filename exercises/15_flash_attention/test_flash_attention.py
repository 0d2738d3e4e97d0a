"""Public tests for exercise 15. Run: pytest exercises/15_flash_attention

The oracle is PyTorch's own attention, F.scaled_dot_product_attention (which
your submission may not use), and torch.logsumexp over the scores for lse,
in float64 to 1e-9; plus the worked example of the README and properties:
fully blocked queries give zeros, and no tensor near n_q × n_k is ever
built. The grader measures the real memory of a long sequence itself.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from coursekit import expect
from coursekit.probes import flash_attention as probes

F64 = {"atol": 1e-9, "rtol": 1e-7}
ONLINE = ["online-softmax-no-rescale", "online-softmax-block-max", "online-softmax-sum-per-block"]


def inputs(seed: int, leading: tuple[int, ...], n_q: int, n_k: int, d: int = 4, d_v: int = 3):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*leading, n, width, generator=gen, dtype=torch.float64)
            for n, width in ((n_q, d), (n_k, d), (n_k, d_v), (n_q, d_v))]


def blocked(n_q: int, n_k: int, causal: bool, shift: int = 0) -> torch.Tensor:
    """True = blocked: key j for query i when j > i + n_k - n_q (+ shift)."""
    if not causal:
        return torch.zeros(n_q, n_k, dtype=torch.bool)
    return torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1 + shift)


def torch_attention(query, key, value, mask):
    """PyTorch's attention (its mask: True = allowed), and lse from the scores."""
    scores = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).masked_fill(mask, float("-inf"))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=~mask), torch.logsumexp(scores, dim=-1)


def check_forward(student, seed, leading, n_q, n_k, block_size, causal, pitfalls=(), diagnose=None):
    query, key, value, _ = inputs(seed, leading, n_q, n_k)
    output, lse = student.tiled_attention(query, key, value, block_size=block_size, causal=causal)
    expected, expected_lse = torch_attention(query, key, value, blocked(n_q, n_k, causal))
    case = f"tiled_attention(q {tuple(query.shape)}, k {tuple(key.shape)}, block_size={block_size}, causal={causal})"
    expect.close(output, expected, **F64, what=f"{case}: output", pitfalls=[*pitfalls, *ONLINE], diagnose=diagnose)
    expect.close(lse, expected_lse, **F64, what=f"{case}: lse (log-sum-exp of each query's scores)",
                 pitfalls=[*pitfalls, *ONLINE], diagnose=diagnose)


# --- the worked example of the README -------------------------------------------

def test_worked_example(student):
    query, key = torch.tensor([[1.0]], dtype=torch.float64), torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    value = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    output, lse = student.tiled_attention(query, key, value, block_size=2)
    # README, "A worked example": two blocks of keys, {0, 1} then {2}.
    expect.close(output, torch.tensor([[2.5752]], dtype=torch.float64), atol=1e-4, rtol=0,
                 what="the README's worked example: output", pitfalls=ONLINE)
    expect.close(lse, torch.tensor([2.4076], dtype=torch.float64), atol=1e-4, rtol=0,
                 what="the README's worked example: lse", pitfalls=ONLINE)


# --- tiled_attention ------------------------------------------------------------------

@pytest.mark.parametrize("leading", [(), (2,), (2, 3)], ids=["(n,d)", "(b,n,d)", "(b,h,n,d)"])
def test_any_leading_dims(student, leading):
    check_forward(student, 1, leading, 7, 7, 3, causal=False)


@pytest.mark.parametrize("n_q,n_k,block_size", [(8, 8, 4), (6, 11, 2), (9, 5, 64)])
def test_without_a_mask(student, n_q, n_k, block_size):
    check_forward(student, 2, (2,), n_q, n_k, block_size, causal=False)


def test_a_block_size_that_does_not_divide_n(student):
    query, key, value, _ = inputs(3, (2,), 10, 10)

    def diagnose():
        output, _ = student.tiled_attention(query, key, value, block_size=4)
        dropped, _ = torch_attention(query, key[..., :8, :], value[..., :8, :], blocked(10, 8, False))
        return ["tiled-last-block-dropped"] if torch.allclose(output, dropped, **F64) else expect.Guesses(ONLINE)
    check_forward(student, 3, (2,), 10, 10, 4, causal=False, pitfalls=["tiled-last-block-dropped"], diagnose=diagnose)


@pytest.mark.parametrize("n_q,n_k,block_size", [(9, 9, 3), (9, 9, 1), (5, 12, 4), (4, 10, 1)])
def test_causal_aligned_bottom_right(student, n_q, n_k, block_size):
    query, key, value, _ = inputs(4, (1, 2), n_q, n_k)

    def diagnose():
        output, _ = student.tiled_attention(query, key, value, block_size=block_size, causal=True)
        top_left = torch.ones(n_q, n_k, dtype=torch.bool).triu(1)
        for pitfall, mask in (("causal-top-left", top_left), ("causal-block-off-by-one", blocked(n_q, n_k, True, -1))):
            # Rows that see no key at all under the mistake are zeros there, not NaN.
            seen = ~mask.all(dim=-1, keepdim=True)
            wrong, _ = torch_attention(query, key, value, mask & seen)
            if torch.allclose(torch.where(seen, wrong, 0.0), output, **F64):
                yield pitfall
    check_forward(student, 4, (1, 2), n_q, n_k, block_size, causal=True, diagnose=diagnose)


@pytest.mark.parametrize("block_size", [2, 64])
def test_a_query_that_sees_no_key(student, block_size):
    query, key, value, _ = inputs(5, (2,), 9, 4)      # causal: queries 0..4 see no key
    output, lse = student.tiled_attention(query, key, value, block_size=block_size, causal=True)
    expect.close(output[..., :5, :], torch.zeros(2, 5, 3, dtype=torch.float64), **F64,
                 what=f"causal, 9 queries and 4 keys (block_size={block_size}): the output of the first 5 queries, "
                      "which see no key", pitfalls=["online-softmax-blocked-nan"])
    expect.close(lse[..., :5], torch.full((2, 5), float("-inf"), dtype=torch.float64), **F64,
                 what="... and their lse", pitfalls=["online-softmax-blocked-nan"])
    check_forward(student, 5, (2,), 9, 4, block_size, causal=True, pitfalls=["online-softmax-blocked-nan"])


def test_inputs_unchanged(student):
    query, key, value, _ = inputs(6, (2,), 6, 6)
    result = probes.forward(student, query, key, value, 4, True)
    expect.equal(result["inputs_unchanged"], True, what="query, key and value unchanged after tiled_attention")


# --- FlashAttention: the backward -------------------------------------------------------

def torch_gradients(query, key, value, grad_output, causal):
    """The output and gradients of softmax(Q Kᵀ/√d) V written out over the
    full matrices (torch.softmax, then the softmax's Jacobian, as in the
    README's backward). Not autograd: PyTorch's first backward through a
    matmul loads hundreds of modules, seconds of this test's time."""
    mask = blocked(query.size(-2), key.size(-2), causal)
    seen = ~mask.all(dim=-1, keepdim=True)
    scale = 1 / math.sqrt(query.size(-1))
    scores = (query @ key.transpose(-2, -1) * scale).masked_fill(mask & seen, float("-inf"))
    weights = torch.softmax(scores, dim=-1) * seen
    output = weights @ value
    grad_weights = grad_output @ value.transpose(-2, -1)
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(dim=-1, keepdim=True))
    return [output, grad_scores @ key * scale, grad_scores.transpose(-2, -1) @ query * scale,
            weights.transpose(-2, -1) @ grad_output]


@pytest.mark.parametrize("n_q,n_k,block_size,causal", [(8, 8, 3, False), (6, 10, 4, True), (9, 6, 2, True)])
@pytest.mark.parametrize("via", ["apply", "wrapper"])
def test_gradients(student, n_q, n_k, block_size, causal, via):
    query, key, value, grad_output = inputs(7, (2, 2), n_q, n_k)
    result = probes.gradients(student, query, key, value, grad_output, block_size, causal, via)
    expected = torch_gradients(query, key, value, grad_output, causal)
    call = ("FlashAttention.apply(q, k, v, causal, block_size)" if via == "apply"
            else "flash_attention(q, k, v, block_size=..., causal=...)")
    names = ("output", "grad_query", "grad_key", "grad_value")
    dv_right = torch.allclose(result["grad_value"], expected[3], **F64)
    for name, want in zip(names, expected):
        expect.close(result[name], want, **F64, what=f"{call}, q {tuple(query.shape)}, k {tuple(key.shape)}, "
                                                     f"causal={causal}: {name}",
                     pitfalls=["online-softmax-blocked-nan"] if n_q > n_k else (),
                     diagnose=lambda: ["flash-backward-delta"] if dv_right and name != "output" else [])


# --- memory: never n_q × n_k ---------------------------------------------------------------

def test_never_builds_the_full_matrix(student):
    query, key, value, _ = inputs(8, (1,), 96, 96, d=4, d_v=4)
    watch = probes.memory_watch(student, query, key, value, block_size=16, causal=True)
    full = 96 * 96
    expect.that(watch["largest_forward"] < full // 2, what="flash_attention(n=96, block_size=16): the largest tensor "
                "any operation made in the forward", expected=f"far fewer than n_q * n_k = {full} elements",
                actual=f"{watch['largest_forward']} elements", pitfalls=["flash-full-matrix"])
    expect.that(watch["saved"] < full // 2, what="elements kept for the backward (ctx.save_for_backward, or what "
                "autograd saves by itself)", expected=f"O(n·d), far fewer than {full}",
                actual=f"{watch['saved']} elements", pitfalls=["flash-autograd-through-blocks"])
    expect.that(watch["largest_backward"] is not None, what="the output's grad_fn", expected="the backward of your "
                "FlashAttention (an autograd.Function)", actual="another autograd node",
                pitfalls=["flash-autograd-through-blocks"])
    expect.that(watch["largest_backward"] < full // 2, what="... and in the backward", expected=f"far fewer than {full}",
                actual=f"{watch['largest_backward']} elements", pitfalls=["flash-backward-full-matrix"])


def test_uses_no_builtin_attention(student):
    query, key, value, _ = inputs(9, (1,), 4, 4)
    student.tiled_attention(query, key, value, block_size=2)   # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write the blocks with matmul, exp and sums")
