"""Public tests for exercise 10. Run: pytest exercises/10_decoder

Your layer gets the weights of PyTorch's own nn.TransformerDecoderLayer
(post-norm, batch-first, ReLU, no dropout; its `multihead_attn` is the
cross-attention) with random weights, LayerNorms included, renamed; its
outputs are compared with stored values: what the reference (and
nn.TransformerDecoderLayer) gives on these inputs. Target and source lengths
differ on purpose.
"""
import functools

import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load as load_fixture, weights_under
from coursekit.probes.decoder import (
    decoder_float64,
    decoder_layer_gradients,
    decoder_layer_output,
    decoder_layer_structure,
    decoder_layer_train_eval,
    decoder_output,
    decoder_structure,
)

LAYER = {"d_model": 8, "num_heads": 2, "d_ff": 16}
SIZES = [  # (d_model, num_heads, d_ff)
    (8, 2, 16),
    (12, 3, 20),
]


def causal(n: int) -> torch.Tensor:
    """(n, n) bool, True above the diagonal: position i may not see j > i."""
    return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


def make_inputs(seed: int, tgt_lengths=(4, 4), src_lengths=(6, 3), d_model: int = 8):
    """x (batch, n_tgt, d_model), memory (batch, n_src, d_model), and their
    padding (batch, n), True at padding."""
    gen = torch.Generator().manual_seed(seed)
    n_tgt, n_src, batch = max(tgt_lengths), max(src_lengths), len(tgt_lengths)
    x = torch.randn(batch, n_tgt, d_model, generator=gen)
    memory = torch.randn(batch, n_src, d_model, generator=gen)
    tgt_pad = torch.arange(n_tgt) >= torch.tensor(tgt_lengths)[:, None]
    src_pad = torch.arange(n_src) >= torch.tensor(src_lengths)[:, None]
    return x, memory, tgt_pad, src_pad


# The public inputs (grader/fixtures_layers.py stores their weights and the
# reference's outputs: keep both in step). Weights: key -> (sizes, seeds of
# PyTorch's layers, one per layer, whether the sublayers output zeros).
WEIGHTS = {
    "8 2 16": ((8, 2, 16), (8,), False),
    "12 3 20": ((12, 3, 20), (12,), False),
    **{f"seed {seed}": ((8, 2, 16), (seed,), False) for seed in (2, 3, 5, 6, 7)},
    "residual": ((8, 2, 16), (4,), True),
    "stack": ((8, 2, 16), (10, 11, 12), False),
}


@functools.cache
def stored() -> dict[str, torch.Tensor]:
    """The stored values, by key (read on first use)."""
    return load_fixture("decoder_10")


def weights(key: str) -> dict[str, torch.Tensor]:
    """The stored weights ``key``, in the contract's parameter names."""
    return weights_under(stored(), key)


def output_cases() -> dict[str, tuple]:
    """Output case -> (class, config, weights key, forward arguments)."""
    cases = {}
    for d_model, num_heads, d_ff in SIZES:
        x, memory, _, src_pad = make_inputs(seed=1, tgt_lengths=(5, 5, 5), src_lengths=(7, 4, 2), d_model=d_model)
        config, key = {"d_model": d_model, "num_heads": num_heads, "d_ff": d_ff}, f"{d_model} {num_heads} {d_ff}"
        cases[f"{key} causal"] = ("DecoderLayer", config, key, [x, memory, causal(5), src_pad[:, None, :]])
    x, memory, tgt_pad, src_pad = make_inputs(seed=2, tgt_lengths=(3, 5), src_lengths=(6, 4))
    cases["target padding"] = ("DecoderLayer", LAYER, "seed 2",  # tgt_mask (2, 5, 5): no future, no padding
                               [x, memory, causal(5) | tgt_pad[:, None, :], src_pad[:, None, :]])
    x, memory, _, _ = make_inputs(seed=3)
    cases["no masks"] = ("DecoderLayer", LAYER, "seed 3", [x, memory, None, None])
    x, memory, _, src_pad = make_inputs(seed=4)
    cases["residual"] = ("DecoderLayer", LAYER, "residual", [x, memory, causal(4), src_pad[:, None, :]])
    x, memory, tgt_pad, src_pad = make_inputs(seed=11, tgt_lengths=(5, 3), src_lengths=(4, 7))
    cases["decoder"] = ("Decoder", {"num_layers": 3, **LAYER}, "stack",
                        [x, memory, causal(5) | tgt_pad[:, None, :], src_pad[:, None, :]])
    return cases


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
        not names, what=f"{what}: the parameters of nn.TransformerDecoderLayer, renamed to the contract's names",
        expected="each one loads into a parameter of yours of the same name, and you have no others",
        actual=(f"you have no parameter named {', '.join(lacking[:6]) or '-'}; "
                f"you have extra parameters {', '.join(extra[:6]) or '-'}"),
        pitfalls=pitfalls,
    )


# --- DecoderLayer -----------------------------------------------------------

@pytest.mark.pitfalls("cross-attn-swapped")
@pytest.mark.parametrize("n_tgt,n_src", [(3, 7), (6, 2), (1, 4)])
def test_layer_output_has_the_target_length(student, n_tgt, n_src):
    gen = torch.Generator().manual_seed(n_tgt)
    x, memory = torch.randn(2, n_tgt, 8, generator=gen), torch.randn(2, n_src, 8, generator=gen)
    result = decoder_layer_output(student, LAYER, {}, x, memory, causal(n_tgt))
    expect.shape(result["output"], (2, n_tgt, 8), pitfalls=["cross-attn-swapped"],
                 what=f"DecoderLayer(8, 2, 16) on x {(2, n_tgt, 8)} and memory {(2, n_src, 8)}: "
                      "one output per target position (queries come from x)")


def test_layer_has_the_contract_submodules(student):
    info = decoder_layer_structure(student, LAYER)
    expected = {"self_attn": "MultiHeadedAttention", "cross_attn": "MultiHeadedAttention",
                "feed_forward": "PositionwiseFeedForward",
                "norm1": "LayerNorm", "norm2": "LayerNorm", "norm3": "LayerNorm"}
    got = {name: info["attributes"].get(name, "(missing)") for name in expected}
    norms_wrong = any(got[f"norm{i}"] != "LayerNorm" for i in (1, 2, 3))
    expect.equal(got, expected, what="sub-modules of DecoderLayer(8, 2, 16), by attribute name",
                 pitfalls=["shared-layernorm"] if norms_wrong else [])
    shared = [names for names in info["aliases"] if any(name.startswith("norm") for name in names)]
    expect.that(not shared, what="norm1, norm2 and norm3",
                expected="three separate nn.LayerNorm objects, each with its own weight and bias",
                actual="one object under the names " + "; ".join(" = ".join(names) for names in shared),
                pitfalls=["shared-layernorm"])
    expect.that(not info["aliases"], what="self_attn and cross_attn",
                expected="two separate MultiHeadedAttention objects, each with its own weights",
                actual="one object under the names " + "; ".join(" = ".join(names) for names in info["aliases"]))
    reference_count = sum(t.numel() for t in weights("8 2 16").values())
    expect.equal(info["parameter_count"], reference_count,
                 what="number of parameters of DecoderLayer(8, 2, 16) (nn.TransformerDecoderLayer has as many)")


@pytest.mark.parametrize("d_model,num_heads,d_ff", SIZES)
def test_layer_matches_torch_causal_and_memory_padding(student, d_model, num_heads, d_ff):
    key = f"{d_model} {num_heads} {d_ff} causal"
    _, config, weights_key, args = output_cases()[key]
    expected = stored()[f"output {key}"]
    result = decoder_layer_output(student, config, weights(weights_key), *args)
    expect_weights_fit(result["load"], f"DecoderLayer({d_model}, {num_heads}, {d_ff})")
    expect.close(result["output"], expected, atol=1e-5,
                 what=f"DecoderLayer({d_model}, {num_heads}, {d_ff}) vs nn.TransformerDecoderLayer: x (3, 5, {d_model}), "
                      f"memory (3, 7, {d_model}), causal tgt_mask (5, 5), memory_mask (3, 1, 7) for source lengths 7, 4, 2")
    expect.that(result["inputs_unchanged"], what="x, memory and the masks after the call",
                expected="unchanged", actual="modified in place")


def test_layer_matches_torch_with_target_padding(student):
    _, _, weights_key, args = output_cases()["target padding"]
    result = decoder_layer_output(student, LAYER, weights(weights_key), *args)
    expect_weights_fit(result["load"], "DecoderLayer(8, 2, 16)")
    expect.close(result["output"], stored()["output target padding"], atol=1e-5,
                 what="DecoderLayer(8, 2, 16) vs nn.TransformerDecoderLayer, tgt_mask (2, 5, 5) = causal | target padding")


def test_layer_matches_torch_without_masks(student):
    _, _, weights_key, (x, memory, _, _) = output_cases()["no masks"]
    result = decoder_layer_output(student, LAYER, weights(weights_key), x, memory)
    expect_weights_fit(result["load"], "DecoderLayer(8, 2, 16)")
    expect.close(result["output"], stored()["output no masks"], atol=1e-5,
                 what="DecoderLayer(8, 2, 16) vs nn.TransformerDecoderLayer, no masks")


def test_residual_connections(student):
    # Zero the last linear map of all three sublayers: each outputs 0, and all
    # that is left is the residual path norm3(norm2(norm1(x))). The three
    # LayerNorms get the same values, so only the residuals matter here.
    _, _, weights_key, args = output_cases()["residual"]
    result = decoder_layer_output(student, LAYER, weights(weights_key), *args)
    expect_weights_fit(result["load"], "DecoderLayer(8, 2, 16)")
    expect.close(result["output"], stored()["output residual"], atol=1e-5,
                 what="DecoderLayer whose sublayers output zeros: the residual path norm3(norm2(norm1(x)))",
                 pitfalls=["residual-missing"])


def test_future_targets_do_not_change_earlier_positions(student):
    layer_weights = weights("seed 5")
    x, memory, _, src_pad = make_inputs(seed=5, tgt_lengths=(6, 6), src_lengths=(5, 3))
    x_other = x.clone()
    x_other[:, 3:] = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(50))  # change positions 3..5
    args = (causal(6), src_pad[:, None, :])
    first = decoder_layer_output(student, LAYER, layer_weights, x, memory, *args)["output"]
    second = decoder_layer_output(student, LAYER, layer_weights, x_other, memory, *args)["output"]
    expect.close(second[:, :3], first[:, :3], atol=1e-5,
                 what="outputs at positions 0-2 when only target positions 3-5 change (tgt_mask must reach self_attn)")


def test_padded_memory_positions_are_ignored(student):
    layer_weights = weights("seed 6")
    x, memory, _, src_pad = make_inputs(seed=6, src_lengths=(6, 2))
    noise = torch.randn(memory.shape, generator=torch.Generator().manual_seed(60))
    memory_other = torch.where(src_pad[..., None], noise, memory)  # other values at padded sources only
    args = (causal(4), src_pad[:, None, :])
    first = decoder_layer_output(student, LAYER, layer_weights, x, memory, *args)["output"]
    second = decoder_layer_output(student, LAYER, layer_weights, x, memory_other, *args)["output"]
    expect.close(second, first, atol=1e-5,
                 what="outputs when only padded memory positions change (memory_mask must reach cross_attn)")


def test_gradients_reach_every_parameter_and_memory(student):
    layer_weights = weights("seed 7")
    x, memory, _, src_pad = make_inputs(seed=7)
    upstream = torch.randn(x.shape, generator=torch.Generator().manual_seed(70))
    result = decoder_layer_gradients(student, LAYER, layer_weights, x, memory, causal(4), src_pad[:, None, :], upstream)
    missing = [name for name, got in result["parameters"].items() if not got]
    shared = any(part.startswith("norm") for name in missing for part in name.split("."))
    expect.gradients_reach_all(result["parameters"], what="gradients of DecoderLayer's parameters",
                               pitfalls=["shared-layernorm"] if shared else [])
    expect.equal(result["inputs"][:2], [True, True], what="non-zero gradients of [x, memory]")


def test_output_is_normalised_post_norm(student):
    # Fresh LayerNorms have weight 1 and bias 0. In a post-norm layer the last
    # operation is norm3, so every output vector has mean 0 and variance 1.
    x, memory, _, _ = make_inputs(seed=8)
    out = decoder_layer_output(student, LAYER, {}, 3.0 * x + 1.0, memory, causal(4))["output"]
    expect.close(out.mean(dim=-1), torch.zeros(out.shape[:-1]), atol=1e-4,
                 what="mean over d_model of each output vector of a fresh DecoderLayer (the last step is norm3)",
                 pitfalls=["pre-norm"])
    expect.close(out.var(dim=-1, unbiased=False), torch.ones(out.shape[:-1]), atol=1e-3,
                 what="variance over d_model of each output vector of a fresh DecoderLayer (the last step is norm3)")


def test_dropout_acts_only_in_training(student):
    x, memory, _, src_pad = make_inputs(seed=9)
    outs = decoder_layer_train_eval(student, {**LAYER, "dropout": 0.5}, x, memory, causal(4), src_pad[:, None, :])
    expect.that(not torch.equal(outs["train_0"], outs["train_1"]), what="DecoderLayer(dropout=0.5) in train mode, two seeds",
                expected="different outputs (dropout is random)", actual="identical outputs")
    expect.close(outs["eval_1"], outs["eval_0"], what="DecoderLayer(dropout=0.5) in eval mode, two seeds (no dropout)")


def test_uses_no_torch_decoder(student):
    x, memory, _, _ = make_inputs(seed=10)
    decoder_layer_output(student, LAYER, {}, x, memory)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="build the layer yourself")


# --- Decoder ----------------------------------------------------------------

def test_decoder_layers_are_registered(student):
    info = decoder_structure(student, {"num_layers": 3, **LAYER})
    expect.layer_stack(info, owner="Decoder(3, 8, 2, 16)", layer_class="DecoderLayer", n=3)


def test_decoder_matches_stacked_torch_layers(student):
    _, config, weights_key, args = output_cases()["decoder"]
    result = decoder_output(student, config, weights(weights_key), *args)
    expect_weights_fit(result["load"], "Decoder(3, 8, 2, 16)")
    expect.close(result["output"], stored()["output decoder"], atol=2e-5,
                 what="Decoder(3, 8, 2, 16) vs three nn.TransformerDecoderLayer applied in turn, same memory for each")


def test_decoder_moves_with_to_float64(student):
    x, memory, _, src_pad = make_inputs(seed=12)
    # .to() only reaches registered layers: check that first, for a clear message.
    expect.modules_registered(decoder_structure(student, {"num_layers": 2, **LAYER})["hidden_lists"],
                              what="the layers of Decoder(2, 8, 2, 16)")
    result = decoder_float64(student, {"num_layers": 2, **LAYER}, x, memory, causal(4), src_pad[:, None, :])
    expect.equal((result["output_dtype"], result["parameter_dtypes"]), ("torch.float64", ["torch.float64"]),
                 what="Decoder(2, ...).to(torch.float64) on float64 inputs: (output dtype, parameter dtypes)")
