"""Public tests for exercise 08. Run: pytest exercises/08_transformer_layers

The oracle is PyTorch itself: nn.MultiheadAttention, nn.LayerNorm,
nn.Linear/nn.ReLU and nn.TransformerEncoderLayer, with your module's weights
copied in by name (README.md, 'What the tests check').
"""
import pytest
import torch
from torch import nn

from coursekit import expect
from coursekit.probes.layers import (
    add_norm_output,
    add_norm_parameter_shapes,
    add_norm_train_eval,
    attention_gradients,
    attention_output,
    attention_parameter_shapes,
    attention_train_eval,
    constructor_error,
    encoder_layer_output,
    feed_forward_output,
    feed_forward_parameter_shapes,
    feed_forward_train_eval,
    random_weights,
    structure,
)
from coursekit.probes.source import forbidden_uses

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


def oracle(weights, d_model, num_heads, query, key, value, bias=True, **masks):
    """(output, per-head weights (b, h, n_q, n_k)) of nn.MultiheadAttention.
    Its attn_mask is (n_q, n_k) or (b * h, n_q, n_k), True = blocked (see
    per_head). (Its key_padding_mask would do for padding too, but its first
    use imports sympy, which takes seconds.)"""
    with torch.no_grad():
        return torch_attention(weights, d_model, num_heads, bias)(
            query, key, value, need_weights=True, average_attn_weights=False, **masks)


def per_head(mask: torch.Tensor, num_heads: int, n_q: int) -> torch.Tensor:
    """A course mask (b, n_q or 1, n_k) as nn.MultiheadAttention's 3-D
    attn_mask: (b * num_heads, n_q, n_k), example-major."""
    return mask.expand(mask.shape[0], n_q, mask.shape[-1]).repeat_interleave(num_heads, dim=0)


def check_loaded(result: dict, what: str) -> None:
    unexpected, missing = result["load"]["unexpected"], result["load"]["missing"]
    expect.that(
        not unexpected and not missing, what=f"loading the contract's parameters into {what}",
        expected="every name of README.md's table, and no other parameter",
        actual=f"your module lacks {unexpected or 'nothing'}; it has extra {missing or 'nothing'}",
        pitfalls=["no-out-proj"] if any(name.startswith("out_proj") for name in unexpected) else [],
    )


def one_head_is_right(student) -> bool:
    """With a single head there is nothing to split or merge: if that works,
    a multi-head failure comes from the split or the merge."""
    weights = random_weights(attention_parameter_shapes(4), seed=99)
    x = randn(2, 3, 4, seed=98)
    output = attention_output(student, 4, 1, weights, x, x, x)["output"]
    expected, _ = oracle(weights, 4, 1, x, x, x)
    return isinstance(output, torch.Tensor) and output.shape == expected.shape and torch.allclose(output, expected, atol=1e-5)


def head_pitfalls(student, result: dict, expected_attn: torch.Tensor, num_heads: int) -> list[str]:
    """The likely cause of a multi-head mismatch, from the per-head weights."""
    if any(name.startswith("out_proj") for name in result["load"]["unexpected"]):
        return ["no-out-proj"]
    if num_heads == 1:
        return []
    attn = result["attn"]
    if isinstance(attn, torch.Tensor) and attn.shape == expected_attn.shape and torch.allclose(attn, expected_attn, atol=1e-5):
        return ["merge-wrong-order"]  # each head attends correctly: the merge is wrong
    return ["view-no-transpose"] if one_head_is_right(student) else []


def check_attention(student, d_model, num_heads, query, key, value, what, mask=None, bias=True, seed=0, **oracle_masks):
    """Output and per-head weights of the student's module against the oracle."""
    weights = random_weights(attention_parameter_shapes(d_model, bias), seed=seed)
    result = attention_output(student, d_model, num_heads, weights, query, key, value, mask=mask, bias=bias)
    expected, expected_attn = oracle(weights, d_model, num_heads, query, key, value, bias=bias, **oracle_masks)
    check_loaded(result, f"MultiHeadedAttention({d_model}, {num_heads}, bias={bias})")
    pitfalls = head_pitfalls(student, result, expected_attn, num_heads)
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
    uses = forbidden_uses(student, ["scaled_dot_product_attention", "MultiheadAttention"])
    expect.that(not uses, what="built-in attention in layers.py", expected="none: write the attention yourself",
                actual=", ".join(f"{u['name']} on line {u['line']}" for u in uses))


# --- MultiHeadedAttention: values against nn.MultiheadAttention -----------------------

def test_self_attention_matches_torch(student):
    x = randn(2, 5, 8, seed=1)
    check_attention(student, 8, 2, x, x, x, "self-attention, d_model = 8, 2 heads, x (2, 5, 8)")


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
                             seed=6, attn_mask=causal)
    expect.that(bool((result["attn"][..., causal] == 0).all()), what="weights on future positions (mask True)",
                expected="exactly 0", actual=f"largest {float(result['attn'][..., causal].abs().max()):.3g}")


def test_padding_mask(student):
    # Key padding in the course's format (b, 1, n_k): the same for every query and head.
    x, memory = randn(2, 3, 8, seed=12), randn(2, 6, 8, seed=13)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    result = check_attention(student, 8, 2, x, memory, memory, "cross-attention with a (2, 1, 6) padding mask",
                             mask=padding.unsqueeze(1), seed=7, attn_mask=per_head(padding.unsqueeze(1), 2, 3))
    expect.that(bool((result["attn"][1, :, :, 4:] == 0).all()), what="weights on padded keys",
                expected="exactly 0", actual=f"largest {float(result['attn'][1, :, :, 4:].abs().max()):.3g}")


def test_per_example_mask(student):
    # A (b, n_q, n_k) mask: causal for both examples, plus padding in the second one.
    x = randn(2, 5, 8, seed=14)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    mask = torch.stack([causal, causal | torch.tensor([False] * 3 + [True] * 2)])
    check_attention(student, 8, 2, x, x, x, "self-attention with a (2, 5, 5) mask (one per example)", mask=mask,
                    seed=8, attn_mask=per_head(mask, 2, 5))


def test_four_dimensional_mask(student):
    x = randn(2, 4, 8, seed=15)
    mask = torch.tensor([[False, True, False, True]] * 4).expand(2, 1, 4, 4)
    check_attention(student, 8, 2, x, x, x, "self-attention with a (2, 1, 4, 4) mask", mask=mask,
                    seed=9, attn_mask=per_head(mask.squeeze(1), 2, 4))


def test_fully_blocked_queries_get_zero_weights(student):
    # The second example is all padding: its queries may attend to nothing.
    x = randn(2, 4, 8, seed=16)
    padding = torch.tensor([[False, False, False, True], [True] * 4])
    weights = random_weights(attention_parameter_shapes(8), seed=10)
    result = attention_output(student, 8, 2, weights, x, x, x, mask=padding.unsqueeze(1))
    expected, _ = oracle(weights, 8, 2, x[:1], x[:1], x[:1], attn_mask=per_head(padding[:1].unsqueeze(1), 2, 4))
    expect.shape(result["output"], (2, 4, 8), what="output with a fully padded second example")
    expect.close(result["attn"][1], torch.zeros(2, 4, 4), what="self.attn of the fully padded example: no NaN",
                 pitfalls=["softmax-all-masked-nan"])
    expect.close(result["output"][1], weights["out_proj.bias"].expand(4, 8),
                 what="output of the fully padded example: zero context, so out_proj(0) = out_proj.bias",
                 pitfalls=["softmax-all-masked-nan"])
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


# --- PositionwiseFeedForward ----------------------------------------------------------

def test_feed_forward_parameters(student):
    found = structure(student, "PositionwiseFeedForward", 8, 32)
    expect.equal(found["parameters"], feed_forward_parameter_shapes(8, 32),
                 what="parameters of PositionwiseFeedForward(8, 32) (name: shape)")


def torch_feed_forward(weights: dict, d_model: int, d_ff: int) -> nn.Sequential:
    ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
    ffn.load_state_dict({k.replace("linear1", "0").replace("linear2", "2"): v for k, v in weights.items()})
    return ffn


def test_feed_forward_matches_torch(student):
    x = randn(2, 5, 8, seed=26)
    weights = random_weights(feed_forward_parameter_shapes(8, 32), seed=15)
    result = feed_forward_output(student, 8, 32, weights, x)
    check_loaded(result, "PositionwiseFeedForward(8, 32)")
    with torch.no_grad():
        expected = torch_feed_forward(weights, 8, 32)(x)
    expect.close(result["output"], expected, what="PositionwiseFeedForward(8, 32) against Linear -> ReLU -> Linear")


def test_feed_forward_dropout_in_training_only(student):
    x = randn(2, 5, 8, seed=27)
    weights = random_weights(feed_forward_parameter_shapes(8, 32), seed=16)
    outputs = feed_forward_train_eval(student, 8, 32, 0.5, weights, x)
    expect.that(not torch.equal(outputs["train_0"], outputs["train_1"]),
                what="PositionwiseFeedForward(8, 32, dropout=0.5) in training mode, under two seeds",
                expected="different outputs", actual="identical outputs: dropout never applied", pitfalls=["dropout-typo"])
    with torch.no_grad():
        expected = torch_feed_forward(weights, 8, 32)(x)
    for name in ("eval_0", "eval_1"):
        expect.close(outputs[name], expected, what=f"PositionwiseFeedForward(8, 32, dropout=0.5) in eval mode ({name})",
                     pitfalls=["dropout-in-eval"])


# --- AddNorm ---------------------------------------------------------------------------

def test_add_norm_parameters(student):
    found = structure(student, "AddNorm", 8)
    expect.equal(found["children"].get("norm"), "LayerNorm", what="AddNorm(8).norm")
    expect.equal(found["parameters"], add_norm_parameter_shapes(8), what="parameters of AddNorm(8) (name: shape)")


def torch_layer_norm(weights: dict, d_model: int) -> nn.LayerNorm:
    norm = nn.LayerNorm(d_model)
    norm.load_state_dict({k.removeprefix("norm."): v for k, v in weights.items()})
    return norm


def test_add_norm_matches_layer_norm_of_the_sum(student):
    x, sublayer_out = randn(2, 5, 8, seed=28), randn(2, 5, 8, seed=29)
    weights = random_weights(add_norm_parameter_shapes(8), seed=17)
    result = add_norm_output(student, 8, weights, x, sublayer_out)
    check_loaded(result, "AddNorm(8)")
    norm = torch_layer_norm(weights, 8)
    with torch.no_grad():
        expected, without_residual = norm(x + sublayer_out), norm(sublayer_out)
    output = result["output"]
    residual_missing = isinstance(output, torch.Tensor) and output.shape == expected.shape and torch.allclose(output, without_residual, atol=1e-5)
    expect.close(output, expected, what="AddNorm(8)(x, sublayer_out) against nn.LayerNorm(8)(x + sublayer_out)",
                 pitfalls=["residual-missing"] if residual_missing else [])


def test_add_norm_dropout_acts_on_the_sublayer_only(student):
    x = randn(2, 5, 8, seed=30)
    weights = random_weights(add_norm_parameter_shapes(8), seed=18)
    norm = torch_layer_norm(weights, 8)
    with torch.no_grad():
        expected, of_zeros = norm(x), norm(torch.zeros_like(x))
    # A zero sublayer output stays zero under dropout: only the residual path is left.
    outputs = add_norm_train_eval(student, 8, 0.5, weights, x, torch.zeros_like(x))
    for name in ("train_0", "train_1", "eval_0"):
        residual_missing = outputs[name].shape == x.shape and torch.allclose(outputs[name], of_zeros, atol=1e-5)
        expect.close(outputs[name], expected, what=f"AddNorm(8, dropout=0.5)(x, zeros) ({name}): LayerNorm(x), x never dropped",
                     pitfalls=["residual-missing"] if residual_missing else [])
    outputs = add_norm_train_eval(student, 8, 0.5, weights, x, randn(2, 5, 8, seed=31))
    expect.that(not torch.equal(outputs["train_0"], outputs["train_1"]),
                what="AddNorm(8, dropout=0.5) in training mode, under two seeds",
                expected="different outputs", actual="identical outputs: dropout never applied", pitfalls=["dropout-typo"])
    expect.that(torch.equal(outputs["eval_0"], outputs["eval_1"]),
                what="AddNorm(8, dropout=0.5) in eval mode, under two seeds",
                expected="identical outputs", actual="different outputs", pitfalls=["dropout-in-eval"])


# --- the three blocks together -----------------------------------------------------------

def test_blocks_make_a_torch_encoder_layer(student):
    d_model, num_heads, d_ff = 8, 2, 16
    shapes = {f"self_attn.{k}": v for k, v in attention_parameter_shapes(d_model).items()}
    shapes |= {f"feed_forward.{k}": v for k, v in feed_forward_parameter_shapes(d_model, d_ff).items()}
    for i in (1, 2):
        shapes |= {f"add_norm{i}.{k}": v for k, v in add_norm_parameter_shapes(d_model).items()}
    weights = random_weights(shapes, seed=19)
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=False)
    with torch.no_grad():
        layer.self_attn.load_state_dict(torch_attention(
            {k.removeprefix("self_attn."): v for k, v in weights.items() if k.startswith("self_attn.")}, d_model, num_heads).state_dict())
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(weights[f"feed_forward.{name}.weight"])
            getattr(layer, name).bias.copy_(weights[f"feed_forward.{name}.bias"])
        for i in (1, 2):
            getattr(layer, f"norm{i}").weight.copy_(weights[f"add_norm{i}.norm.weight"])
            getattr(layer, f"norm{i}").bias.copy_(weights[f"add_norm{i}.norm.bias"])
    x = randn(2, 5, d_model, seed=32)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    result = encoder_layer_output(student, d_model, num_heads, d_ff, weights, x, mask=padding.unsqueeze(1))
    with torch.no_grad():
        # Train mode (dropout is 0) keeps PyTorch on its plain math path.
        expected = layer.train()(x, src_mask=per_head(padding.unsqueeze(1), num_heads, 5))
    expect.close(result, expected, what="AddNorm(x, MHA(x, x, x, mask)), then AddNorm(y, FFN(y)), "
                                        "against nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=False)")
