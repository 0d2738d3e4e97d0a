"""Public tests for exercise 08, PositionwiseFeedForward and AddNorm, and
the three blocks composed into an encoder layer.
Run: pytest exercises/08_transformer_layers

The oracles are nn.Linear/nn.ReLU, nn.LayerNorm and nn.TransformerEncoderLayer
with your modules' weights copied in by name (README.md, 'What the tests check').
"""
import torch
from torch import nn

from coursekit import expect
from coursekit.probes.layers import (add_norm_output, add_norm_parameter_shapes, add_norm_train_eval,
                                     attention_parameter_shapes, encoder_layer_output, feed_forward_output,
                                     feed_forward_parameter_shapes, feed_forward_train_eval, random_weights, structure)


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_loaded(result: dict, what: str) -> None:
    unexpected, missing = result["load"]["unexpected"], result["load"]["missing"]
    expect.that(not unexpected and not missing, what=f"loading the contract's parameters into {what}",
                expected="every name of README.md's table, and no other parameter",
                actual=f"your module lacks {unexpected or 'nothing'}; it has extra {missing or 'nothing'}")


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
    # Dropout sits on the hidden layer, before linear2: an output entry that
    # is exactly 0 means the output itself was dropped.
    zeros = int((outputs["train_0"] == 0).sum())
    expect.that(zeros == 0, what="PositionwiseFeedForward(8, 32, dropout=0.5) output in training mode",
                expected="no entry exactly 0 (dropout between ReLU and linear2, not after linear2)",
                actual=f"{zeros} entries exactly 0")
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
    # nn.MultiheadAttention packs the three input projections into one matrix.
    roles = ("W_query", "W_key", "W_value")
    state = {"self_attn.in_proj_weight": torch.cat([weights[f"self_attn.{r}.weight"] for r in roles]),
             "self_attn.in_proj_bias": torch.cat([weights[f"self_attn.{r}.bias"] for r in roles])}
    state |= {k.removeprefix("feed_forward.").replace("add_norm1.norm", "norm1").replace("add_norm2.norm", "norm2"): v
              for k, v in weights.items() if not k.startswith(tuple(f"self_attn.{r}" for r in roles))}
    layer.load_state_dict(state)
    x = randn(2, 5, d_model, seed=32)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    result = encoder_layer_output(student, d_model, num_heads, d_ff, weights, x, mask=padding.unsqueeze(1))
    with torch.no_grad():
        # Train mode (dropout is 0) keeps PyTorch on its plain math path.
        # src_mask (b * h, n, n), True = blocked: the padding, repeated for each query and head.
        expected = layer.train()(x, src_mask=padding[:, None, :].expand(2, 5, 5).repeat_interleave(num_heads, dim=0))
    expect.close(result, expected, what="AddNorm(x, MHA(x, x, x, mask)), then AddNorm(y, FFN(y)), "
                                        "against nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=False)")
