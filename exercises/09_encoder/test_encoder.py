"""Public tests for exercise 09. Run: pytest exercises/09_encoder

Your layer gets the weights of PyTorch's own nn.TransformerEncoderLayer
(post-norm, batch-first, ReLU, no dropout) with random weights, LayerNorms
included, renamed; its outputs are compared with stored values: what the
reference (and nn.TransformerEncoderLayer) gives on these inputs.
"""
import functools

import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load as load_fixture, weights_under
from coursekit.probes.encoder import (
    encoder_float64,
    encoder_layer_gradients,
    encoder_layer_output,
    encoder_layer_structure,
    encoder_layer_train_eval,
    encoder_output,
    encoder_structure,
)

LAYER = {"d_model": 8, "num_heads": 2, "d_ff": 16}
SIZES = [  # (d_model, num_heads, d_ff)
    (8, 2, 16),
    (12, 3, 20),
]


# The public inputs (grader/fixtures_layers.py stores their weights and the
# reference's outputs: keep both in step). Weights: key -> (sizes, seeds of
# PyTorch's layers, one per layer, whether the sublayers output zeros).
WEIGHTS = {
    "8 2 16": ((8, 2, 16), (8,), False),
    "12 3 20": ((12, 3, 20), (12,), False),
    "seed 2": ((8, 2, 16), (2,), False),
    "residual": ((8, 2, 16), (3,), True),
    "seed 4": ((8, 2, 16), (4,), False),
    "seed 5": ((8, 2, 16), (5,), False),
    "stack": ((8, 2, 16), (10, 11, 12), False),
}


@functools.cache
def stored() -> dict[str, torch.Tensor]:
    """The stored values, by key (read on first use)."""
    return load_fixture("encoder_09")


def weights(key: str) -> dict[str, torch.Tensor]:
    """The stored weights ``key``, in the contract's parameter names."""
    return weights_under(stored(), key)


def output_cases() -> dict[str, tuple]:
    """Output case -> (class, config, weights key, forward arguments)."""
    cases = {}
    for d_model, num_heads, d_ff in SIZES:
        x, padding = make_inputs(seed=1, lengths=(6, 4, 2), d_model=d_model)
        config = {"d_model": d_model, "num_heads": num_heads, "d_ff": d_ff}
        cases[f"{d_model} {num_heads} {d_ff} padding"] = ("EncoderLayer", config, f"{d_model} {num_heads} {d_ff}",
                                                          [x, padding[:, None, :]])
    cases["no mask"] = ("EncoderLayer", LAYER, "seed 2", [make_inputs(seed=2)[0], None])
    x, padding = make_inputs(seed=3)
    cases["residual"] = ("EncoderLayer", LAYER, "residual", [x, padding[:, None, :]])
    x, padding = make_inputs(seed=9, lengths=(4, 6))
    cases["encoder"] = ("Encoder", {"num_layers": 3, **LAYER}, "stack", [x, padding[:, None, :]])
    return cases


def make_inputs(seed: int, lengths: tuple[int, ...] = (5, 3), d_model: int = 8):
    """x (batch, n, d_model) and its padding (batch, n), True at padding."""
    n = max(lengths)
    x = torch.randn(len(lengths), n, d_model, generator=torch.Generator().manual_seed(seed))
    padding = torch.arange(n) >= torch.tensor(lengths)[:, None]
    return x, padding


def expect_weights_fit(load: dict, what: str) -> None:
    """Every parameter of torch's layer found its place in yours, and yours has no other."""
    lacking, extra = load["unexpected"], load["missing"]
    names = lacking + extra
    if lacking and not extra and all(name.startswith("layers.") for name in lacking):
        pitfalls = ["plain-list-layers"]  # the stack registers no layer at all
    elif any(part.startswith("norm") for name in names for part in name.split(".")):
        pitfalls = ["shared-layernorm"]
    else:
        pitfalls = []
    expect.that(
        not names, what=f"{what}: the parameters of nn.TransformerEncoderLayer, renamed to the contract's names",
        expected="each one loads into a parameter of yours of the same name, and you have no others",
        actual=(f"you have no parameter named {', '.join(lacking[:6]) or '-'}; "
                f"you have extra parameters {', '.join(extra[:6]) or '-'}"),
        pitfalls=pitfalls,
    )


# --- EncoderLayer -----------------------------------------------------------

@pytest.mark.parametrize("batch,n,d_model,num_heads,d_ff", [(1, 1, 8, 2, 16), (2, 5, 8, 2, 16), (3, 7, 12, 3, 20)])
def test_layer_keeps_the_shape(student, batch, n, d_model, num_heads, d_ff):
    x = torch.randn(batch, n, d_model, generator=torch.Generator().manual_seed(n))
    config = {"d_model": d_model, "num_heads": num_heads, "d_ff": d_ff}
    result = encoder_layer_output(student, config, {}, x)
    expect.shape(result["output"], (batch, n, d_model), what=f"EncoderLayer({d_model}, {num_heads}, {d_ff}) on x of shape {(batch, n, d_model)}")


def test_layer_has_the_contract_submodules(student):
    info = encoder_layer_structure(student, LAYER)
    expected = {"self_attn": "MultiHeadedAttention", "feed_forward": "PositionwiseFeedForward",
                "norm1": "LayerNorm", "norm2": "LayerNorm"}
    got = {name: info["attributes"].get(name, "(missing)") for name in expected}
    norms_wrong = got["norm1"] != "LayerNorm" or got["norm2"] != "LayerNorm"
    expect.equal(got, expected, what="sub-modules of EncoderLayer(8, 2, 16), by attribute name",
                 pitfalls=["shared-layernorm"] if norms_wrong else [])
    shared = [names for names in info["aliases"] if any(name.startswith("norm") for name in names)]
    expect.that(not shared, what="norm1 and norm2",
                expected="two separate nn.LayerNorm objects, each with its own weight and bias",
                actual="one object under the names " + "; ".join(" = ".join(names) for names in shared),
                pitfalls=["shared-layernorm"])
    reference_count = sum(t.numel() for t in weights("8 2 16").values())
    expect.equal(info["parameter_count"], reference_count,
                 what="number of parameters of EncoderLayer(8, 2, 16) (nn.TransformerEncoderLayer has as many)")


@pytest.mark.parametrize("d_model,num_heads,d_ff", SIZES)
def test_layer_matches_torch_with_padding(student, d_model, num_heads, d_ff):
    key = f"{d_model} {num_heads} {d_ff} padding"
    _, config, weights_key, (x, mask) = output_cases()[key]
    expected = stored()[f"output {key}"]
    result = encoder_layer_output(student, config, weights(weights_key), x, mask)
    expect_weights_fit(result["load"], f"EncoderLayer({d_model}, {num_heads}, {d_ff})")
    expect.close(result["output"], expected, atol=1e-5,
                 what=f"EncoderLayer({d_model}, {num_heads}, {d_ff}) vs nn.TransformerEncoderLayer, "
                      "padding mask (3, 1, 6) for lengths 6, 4, 2")
    expect.that(result["inputs_unchanged"], what="x and mask after the call",
                expected="unchanged", actual="modified in place")


def test_layer_matches_torch_without_mask(student):
    _, _, weights_key, (x, _) = output_cases()["no mask"]
    result = encoder_layer_output(student, LAYER, weights(weights_key), x, None)
    expect_weights_fit(result["load"], "EncoderLayer(8, 2, 16)")
    expect.close(result["output"], stored()["output no mask"], atol=1e-5,
                 what="EncoderLayer(8, 2, 16) vs nn.TransformerEncoderLayer, mask=None")


def test_residual_connections(student):
    # Zero the last linear map of both sublayers: each sublayer now outputs 0,
    # and all that is left is the residual path, norm2(norm1(x + 0) + 0).
    # Both LayerNorms get the same values, so only the residuals matter here.
    _, _, weights_key, (x, mask) = output_cases()["residual"]
    result = encoder_layer_output(student, LAYER, weights(weights_key), x, mask)
    expect_weights_fit(result["load"], "EncoderLayer(8, 2, 16)")
    expect.close(result["output"], stored()["output residual"], atol=1e-5,
                 what="EncoderLayer whose sublayers output zeros: the residual path norm2(norm1(x))",
                 pitfalls=["residual-missing"])


def test_padded_positions_do_not_change_the_others(student):
    layer_weights = weights("seed 4")
    x, padding = make_inputs(seed=4, lengths=(5, 2))
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(40))
    x_other = torch.where(padding[..., None], noise, x)  # other values at padded positions only
    mask = padding[:, None, :]
    first = encoder_layer_output(student, LAYER, layer_weights, x, mask)["output"]
    second = encoder_layer_output(student, LAYER, layer_weights, x_other, mask)["output"]
    real = ~padding
    expect.close(second[real], first[real], atol=1e-5,
                 what="outputs at real positions when only the padded positions of x change "
                      "(the mask must reach self_attn)")


def test_gradients_reach_every_parameter(student):
    x, padding = make_inputs(seed=5)
    upstream = torch.randn(x.shape, generator=torch.Generator().manual_seed(50))
    result = encoder_layer_gradients(student, LAYER, weights("seed 5"), x, padding[:, None, :], upstream)
    missing = [name for name, got in result["parameters"].items() if not got]
    shared = any(part.startswith("norm") for name in missing for part in name.split("."))
    expect.gradients_reach_all(result["parameters"], what="gradients of EncoderLayer's parameters",
                               pitfalls=["shared-layernorm"] if shared else [])
    expect.that(result["inputs"][0], what="gradient of the input x",
                expected="non-zero", actual="none or zero")


def test_output_is_normalised_post_norm(student):
    # Fresh LayerNorms have weight 1 and bias 0. In a post-norm layer the last
    # operation is norm2, so every output vector has mean 0 and variance 1.
    x, padding = make_inputs(seed=6)
    out = encoder_layer_output(student, LAYER, {}, 3.0 * x + 1.0, padding[:, None, :])["output"]
    expect.close(out.mean(dim=-1), torch.zeros(out.shape[:-1]), atol=1e-4,
                 what="mean over d_model of each output vector of a fresh EncoderLayer (the last step is norm2)",
                 pitfalls=["pre-norm"])
    expect.close(out.var(dim=-1, unbiased=False), torch.ones(out.shape[:-1]), atol=1e-3,
                 what="variance over d_model of each output vector of a fresh EncoderLayer (the last step is norm2)")


def test_dropout_acts_only_in_training(student):
    x, padding = make_inputs(seed=7)
    outs = encoder_layer_train_eval(student, {**LAYER, "dropout": 0.5}, x, padding[:, None, :])
    expect.that(not torch.equal(outs["train_0"], outs["train_1"]), what="EncoderLayer(dropout=0.5) in train mode, two seeds",
                expected="different outputs (dropout is random)", actual="identical outputs")
    expect.close(outs["eval_1"], outs["eval_0"], what="EncoderLayer(dropout=0.5) in eval mode, two seeds (no dropout)")


def test_uses_no_torch_encoder(student):
    encoder_layer_output(student, LAYER, {}, make_inputs(seed=8)[0])  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="build the layer yourself")


# --- Encoder ----------------------------------------------------------------

def test_encoder_layers_are_registered(student):
    info = encoder_structure(student, {"num_layers": 3, **LAYER})
    expect.layer_stack(info, owner="Encoder(3, 8, 2, 16)", layer_class="EncoderLayer", n=3)


def test_encoder_matches_stacked_torch_layers(student):
    _, config, weights_key, (x, mask) = output_cases()["encoder"]
    expected = stored()["output encoder"]
    result = encoder_output(student, config, weights(weights_key), x, mask)
    expect_weights_fit(result["load"], "Encoder(3, 8, 2, 16)")
    expect.close(result["output"], expected, atol=2e-5,
                 what="Encoder(3, 8, 2, 16) vs three nn.TransformerEncoderLayer applied in turn, with padding")


def test_encoder_moves_with_to_float64(student):
    x, padding = make_inputs(seed=11)
    # .to() only reaches registered layers: check that first, for a clear message.
    expect.modules_registered(encoder_structure(student, {"num_layers": 2, **LAYER})["hidden_lists"],
                              what="the layers of Encoder(2, 8, 2, 16)")
    result = encoder_float64(student, {"num_layers": 2, **LAYER}, x, padding[:, None, :])
    expect.equal((result["output_dtype"], result["parameter_dtypes"]), ("torch.float64", ["torch.float64"]),
                 what="Encoder(2, ...).to(torch.float64) on a float64 input: (output dtype, parameter dtypes)")
