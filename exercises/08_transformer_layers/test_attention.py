"""Public tests for exercise 08, MultiHeadedAttention.
Run: pytest exercises/08_transformer_layers

The oracle is nn.MultiheadAttention with your module's weights copied in by
name (README.md, 'What the tests check').
"""
import pytest
import torch
from torch import nn

from coursekit import expect
from coursekit.probes.layers import (attention_attributes, attention_gradients, attention_output, attention_parameter_shapes,
                                     attention_train_eval, constructor_error, random_weights, structure)

ROLES = ("W_query", "W_key", "W_value")


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def torch_attention(weights: dict, d_model: int, num_heads: int, bias: bool = True) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding the same weights. It packs the three
    input projections into one (3 * d_model, d_model) matrix."""
    oracle = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    with torch.no_grad():
        oracle.in_proj_weight.copy_(torch.cat([weights[f"{role}.weight"] for role in ROLES]))
        oracle.out_proj.weight.copy_(weights["out_proj.weight"])
        if bias:
            oracle.in_proj_bias.copy_(torch.cat([weights[f"{role}.bias"] for role in ROLES]))
            oracle.out_proj.bias.copy_(weights["out_proj.bias"])
    return oracle.eval()


def per_head(mask: torch.Tensor | None, num_heads: int, n_q: int) -> torch.Tensor | None:
    """A course mask as nn.MultiheadAttention's attn_mask (True = blocked in
    both): (n_q, n_k) as is; (b, n_q or 1, n_k) and (b, 1, n_q, n_k) as
    (b * num_heads, n_q, n_k), example-major."""
    if mask is None or mask.dim() == 2:
        return mask
    if mask.dim() == 4:
        mask = mask[:, 0]
    return mask.expand(mask.shape[0], n_q, mask.shape[-1]).repeat_interleave(num_heads, dim=0)


def oracle(weights, d_model, num_heads, query, key, value, mask=None, bias=True):
    """(output, per-head weights (b, h, n_q, n_k)) of nn.MultiheadAttention.
    (Its key_padding_mask would do for padding too, but its first use
    imports sympy, which takes seconds: the tests pass attn_mask only.)"""
    with torch.no_grad():
        return torch_attention(weights, d_model, num_heads, bias)(
            query, key, value, attn_mask=per_head(mask, num_heads, query.shape[1]),
            need_weights=True, average_attn_weights=False)


def check_loaded(result: dict, what: str) -> None:
    unexpected, missing = result["load"]["unexpected"], result["load"]["missing"]
    expect.that(
        not unexpected and not missing, what=f"loading the contract's parameters into {what}",
        expected="every name of README.md's table, and no other parameter",
        actual=f"your module lacks {unexpected or 'nothing'}; it has extra {missing or 'nothing'}",
        pitfalls=["no-out-proj"] if any(name.startswith("out_proj") for name in unexpected) else [],
    )


def matches(actual, expected: torch.Tensor) -> bool:
    return isinstance(actual, torch.Tensor) and actual.shape == expected.shape and torch.allclose(actual, expected, atol=1e-5)


def one_head_is_right(student, d_model: int, inputs: tuple, mask, bias: bool) -> bool:
    """The same call with a single head, where there is nothing to split or
    merge: if that works, a multi-head failure comes from the split or merge."""
    weights = random_weights(attention_parameter_shapes(d_model, bias), seed=99)
    result = attention_output(student, d_model, 1, weights, *inputs, mask=mask, bias=bias)
    expected, expected_attn = oracle(weights, d_model, 1, *inputs, mask=mask, bias=bias)
    return matches(result["output"], expected) and matches(result["attn"], expected_attn)


def head_pitfalls(student, result: dict, weights: dict, d_model: int, num_heads: int, inputs: tuple,
                  mask, bias: bool) -> list[str]:
    """The likely cause of a mismatch, found by asking the oracle what a
    known mistake would give."""
    if any(name.startswith("out_proj") for name in result["load"]["unexpected"]):
        return ["no-out-proj"]
    _, expected_attn = oracle(weights, d_model, num_heads, *inputs, mask=mask, bias=bias)
    if matches(result["attn"], expected_attn):
        # Each head attends correctly: the merge, or the output projection.
        identity_out = {**weights, "out_proj.weight": torch.eye(d_model)}
        if bias:
            identity_out["out_proj.bias"] = torch.zeros(d_model)
        if matches(result["output"], oracle(identity_out, d_model, num_heads, *inputs, mask=mask, bias=bias)[0]):
            return ["no-out-proj"]
        return ["merge-wrong-order"] if num_heads > 1 else []
    # Scaling W_query (and its bias) by f scales every score by f: the oracle
    # then shows what a wrong scale gives.
    head_dim = d_model // num_heads
    for factor, pitfall in ((head_dim ** 0.5, "missing-scale"), ((head_dim / d_model) ** 0.5, "scale-by-d"),
                            (head_dim ** -0.5, "scale-by-d")):
        scaled = {k: v * factor if k.startswith("W_query") else v for k, v in weights.items()}
        if factor != 1 and matches(result["attn"], oracle(scaled, d_model, num_heads, *inputs, mask=mask, bias=bias)[1]):
            return [pitfall]
    try:
        if num_heads > 1 and one_head_is_right(student, d_model, inputs, mask, bias):
            return ["view-no-transpose"]
    except Exception:  # the diagnosis must not hide the mismatch it explains
        pass
    return []


def check_attention(student, d_model, num_heads, query, key, value, what, mask=None, bias=True, seed=0):
    """Output and per-head weights of the student's module against the oracle."""
    weights = random_weights(attention_parameter_shapes(d_model, bias), seed=seed)
    result = attention_output(student, d_model, num_heads, weights, query, key, value, mask=mask, bias=bias)
    expected, expected_attn = oracle(weights, d_model, num_heads, query, key, value, mask=mask, bias=bias)
    check_loaded(result, f"MultiHeadedAttention({d_model}, {num_heads}, bias={bias})")
    pitfalls = []
    if not (matches(result["attn"], expected_attn) and matches(result["output"], expected)):
        pitfalls = head_pitfalls(student, result, weights, d_model, num_heads, (query, key, value), mask, bias)
    expect.shape(result["output"], tuple(expected.shape), what=f"output of {what}", pitfalls=pitfalls)
    expect.shape(result["attn"], tuple(expected_attn.shape), what=f"self.attn after {what}: (b, h, n_q, n_k)", pitfalls=pitfalls)
    expect.close(result["attn"], expected_attn, what=f"per-head attention weights (self.attn) of {what}", pitfalls=pitfalls)
    expect.close(result["output"], expected, what=f"output of {what}", pitfalls=pitfalls)
    return result


# --- MultiHeadedAttention: structure ------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
def test_attention_parameters(student, bias):
    found = structure(student, "MultiHeadedAttention", 8, 2, bias=bias)
    expect.modules_registered(found["hidden_lists"])
    expected = attention_parameter_shapes(8, bias)
    lacking = sorted(set(expected) - set(found["parameters"]))
    expect.equal(found["parameters"], expected, what=f"parameters of MultiHeadedAttention(8, 2, bias={bias}) (name: shape)",
                 pitfalls=["no-out-proj"] if any(name.startswith("out_proj") for name in lacking) else [])


def test_num_heads_must_divide_d_model(student):
    structure(student, "MultiHeadedAttention", 8, 2)  # a stub has nothing to check yet
    error = constructor_error(student, "MultiHeadedAttention", 8, 3)
    expect.that(error is not None and error["type"] == "ValueError", what="MultiHeadedAttention(8, 3)",
                expected="ValueError (8 features cannot be cut into 3 equal heads)",
                actual="no error" if error is None else f"{error['type']}: {error['message']}")


def test_uses_no_builtin_attention(student):
    structure(student, "MultiHeadedAttention", 4, 2)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write the attention yourself")


# --- MultiHeadedAttention: values against nn.MultiheadAttention -----------------------

def test_self_attention_matches_torch(student):
    x = randn(2, 5, 8, seed=1)
    check_attention(student, 8, 2, x, x, x, "self-attention, d_model = 8, 2 heads, x (2, 5, 8)")


def test_large_scores_stay_finite(student):
    # Scores in the hundreds: exp() overflows unless the softmax subtracts each row's maximum.
    x = randn(2, 5, 8, seed=11) * 8
    weights = random_weights(attention_parameter_shapes(8), seed=3)
    result = attention_output(student, 8, 2, weights, x, x, x)
    expected, expected_attn = oracle(weights, 8, 2, x, x, x)
    what = "self-attention on large inputs (scores in the hundreds), x (2, 5, 8)"
    expect.close(result["attn"], expected_attn, atol=1e-4, rtol=1e-3, what=f"self.attn of {what}",
                 pitfalls=["softmax-overflow"])
    expect.close(result["output"], expected, atol=1e-4, rtol=1e-3, what=f"output of {what}",
                 pitfalls=["softmax-overflow"])


def test_attn_is_none_before_the_first_forward(student):
    found = attention_attributes(student, 8, 2)
    expect.equal(found["attn"], "None", what="MultiHeadedAttention(8, 2).attn right after the constructor "
                 "(\"missing\": not set in __init__)")


def test_single_head_matches_torch(student):
    x = randn(2, 4, 6, seed=2)
    check_attention(student, 6, 1, x, x, x, "self-attention with a single head, x (2, 4, 6)", seed=1)


def test_without_bias_matches_torch(student):
    x = randn(2, 4, 8, seed=3)
    check_attention(student, 8, 4, x, x, x, "MultiHeadedAttention(8, 4, bias=False) on x (2, 4, 8)", bias=False, seed=2)


def test_cross_attention_matches_torch(student):
    # Decoder queries attend to the encoder's output: n_q = 3 queries, n_k = 6 keys.
    x, memory = randn(2, 3, 8, seed=4), randn(2, 6, 8, seed=5)
    check_attention(student, 8, 2, x, memory, memory, "cross-attention: query (2, 3, 8), key = value = memory (2, 6, 8)", seed=3)


def test_key_and_value_play_their_roles(student):
    query, key, value = randn(2, 4, 8, seed=6), randn(2, 5, 8, seed=7), randn(2, 5, 8, seed=8)
    check_attention(student, 8, 2, query, key, value, "attention with three different inputs (key != value)", seed=4)


@pytest.mark.parametrize("d_model,num_heads,n_q,n_k", [(12, 3, 4, 4), (16, 4, 1, 7), (6, 2, 5, 2)])
def test_several_sizes(student, d_model, num_heads, n_q, n_k):
    query, memory = randn(3, n_q, d_model, seed=9), randn(3, n_k, d_model, seed=10)
    check_attention(student, d_model, num_heads, query, memory, memory,
                    f"MultiHeadedAttention({d_model}, {num_heads}), query (3, {n_q}, {d_model}), memory (3, {n_k}, {d_model})",
                    seed=5)


# --- masks ----------------------------------------------------------------------------

def test_causal_mask(student):
    x = randn(2, 5, 8, seed=11)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    result = check_attention(student, 8, 2, x, x, x, "self-attention with a causal (5, 5) mask", mask=causal,
                             seed=6)
    expect.that(bool((result["attn"][..., causal] == 0).all()), what="weights on future positions (mask True)",
                expected="exactly 0", actual=f"largest {float(result['attn'][..., causal].abs().max()):.3g}")


def test_padding_mask(student):
    # Key padding in the course's format (b, 1, n_k): the same for every query and head.
    x, memory = randn(2, 3, 8, seed=12), randn(2, 6, 8, seed=13)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    result = check_attention(student, 8, 2, x, memory, memory, "cross-attention with a (2, 1, 6) padding mask",
                             mask=padding.unsqueeze(1), seed=7)
    expect.that(bool((result["attn"][1, :, :, 4:] == 0).all()), what="weights on padded keys",
                expected="exactly 0", actual=f"largest {float(result['attn'][1, :, :, 4:].abs().max()):.3g}")


def test_per_example_mask(student):
    # A (b, n_q, n_k) mask: causal for both examples, plus padding in the second one.
    x = randn(2, 5, 8, seed=14)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    mask = torch.stack([causal, causal | torch.tensor([False] * 3 + [True] * 2)])
    check_attention(student, 8, 2, x, x, x, "self-attention with a (2, 5, 5) mask (one per example)", mask=mask,
                    seed=8)


def test_four_dimensional_mask(student):
    x = randn(2, 4, 8, seed=15)
    mask = torch.tensor([[False, True, False, True]] * 4).expand(2, 1, 4, 4)
    check_attention(student, 8, 2, x, x, x, "self-attention with a (2, 1, 4, 4) mask", mask=mask,
                    seed=9)


def test_fully_blocked_queries_get_zero_weights(student):
    # The second example is all padding: its queries may attend to nothing.
    x = randn(2, 4, 8, seed=16)
    padding = torch.tensor([[False, False, False, True], [True] * 4])
    weights = random_weights(attention_parameter_shapes(8), seed=10)
    result = attention_output(student, 8, 2, weights, x, x, x, mask=padding.unsqueeze(1))
    expected, _ = oracle(weights, 8, 2, x[:1], x[:1], x[:1], mask=padding[:1].unsqueeze(1))
    expect.shape(result["output"], (2, 4, 8), what="output with a fully padded second example")
    blocked = result["attn"][1] if isinstance(result["attn"], torch.Tensor) else None
    # NaN: a plain softmax over -inf only; uniform 1/4: -1e9 instead of -inf.
    pitfalls = ([] if blocked is None else ["softmax-all-masked-nan"] if blocked.isnan().any()
                else ["mask-minus-1e9"] if torch.allclose(blocked, torch.full_like(blocked, 0.25)) else [])
    expect.close(blocked, torch.zeros(2, 4, 4), what="self.attn of the fully padded example: zero weights, no NaN",
                 pitfalls=pitfalls)
    expect.close(result["output"][1], weights["out_proj.bias"].expand(4, 8),
                 what="output of the fully padded example: zero context, so out_proj(0) = out_proj.bias",
                 pitfalls=["softmax-all-masked-nan"] if result["output"][1].isnan().any() else [])
    expect.close(result["output"][:1], expected, what="output of the first example, next to a fully padded one")


# --- gradients, dropout, inputs ------------------------------------------------------

def test_gradients_match_torch(student):
    query, key, value = randn(2, 3, 8, seed=17), randn(2, 5, 8, seed=18), randn(2, 5, 8, seed=19)
    upstream = randn(2, 3, 8, seed=20)
    weights = random_weights(attention_parameter_shapes(8), seed=11)
    grads = attention_gradients(student, 8, 2, weights, query, key, value, upstream)
    inputs = [t.clone().requires_grad_(True) for t in (query, key, value)]
    output, _ = torch_attention(weights, 8, 2)(*inputs, need_weights=False)
    (output * upstream).sum().backward()
    for name, tensor in zip(("query", "key", "value"), inputs):
        expect.close(grads[name], tensor.grad, what=f"gradient with respect to {name}")


def test_every_parameter_gets_a_gradient(student):
    x, upstream = randn(2, 4, 8, seed=21), randn(2, 4, 8, seed=22)
    weights = random_weights(attention_parameter_shapes(8), seed=12)
    grads = attention_gradients(student, 8, 2, weights, x, x, x, upstream)["parameters"]
    # W_key.bias adds the same number to every score of a row, which the
    # softmax ignores: its gradient is zero in exact arithmetic.
    without = sorted(name for name, g in grads.items()
                     if name != "W_key.bias" and (g is None or not bool(g.abs().sum() > 0)))
    expect.that(not without, what="gradients of the parameters after backward()",
                expected="a non-zero gradient for every parameter (W_key.bias excepted, see the test's comment)",
                actual="none for " + ", ".join(without),
                pitfalls=["no-out-proj"] if any(name.startswith("out_proj") for name in without) else [])


def test_dropout_on_the_weights_in_training_only(student):
    x = randn(2, 5, 8, seed=23)
    weights = random_weights(attention_parameter_shapes(8), seed=13)
    found = attention_train_eval(student, 8, 2, 0.5, weights, x)
    expect.that(not torch.equal(found["train_0"]["output"], found["train_1"]["output"]),
                what="MultiHeadedAttention(8, 2, dropout=0.5) in training mode, under two seeds",
                expected="different outputs", actual="identical outputs: dropout never applied", pitfalls=["dropout-typo"])
    expect.that(torch.equal(found["eval_0"]["output"], found["eval_1"]["output"]),
                what="MultiHeadedAttention(8, 2, dropout=0.5) in eval mode, under two seeds",
                expected="identical outputs (no dropout in eval mode)", actual="different outputs", pitfalls=["dropout-in-eval"])
    expected, expected_attn = oracle(weights, 8, 2, x, x, x)
    expect.close(found["eval_0"]["output"], expected, what="output in eval mode (dropout = 0.5)")
    train_attn, kept = found["train_0"]["attn"], found["train_0"]["attn"] != 0
    expect.close(train_attn[kept], 2 * expected_attn[kept],
                 what="self.attn in training mode (p = 0.5): the weights dropout keeps are scaled by 1 / (1 - p)")


def test_does_not_modify_its_inputs(student):
    query, memory = randn(2, 3, 8, seed=24), randn(2, 4, 8, seed=25)
    mask = torch.tensor([[False, False, True, True], [False] * 4]).unsqueeze(1)
    result = attention_output(student, 8, 2, random_weights(attention_parameter_shapes(8), seed=14),
                              query, memory, memory, mask=mask)
    expect.that(result["inputs_unchanged"], what="query, key, value and mask after the call",
                expected="unchanged", actual="modified in place", pitfalls=["mask-inplace-buffer"])
