"""Public tests for exercise 12. Run: pytest exercises/12_gpt

The tests draw random weights in the contract's names, load them into your
modules by name, and compare what they compute with stored values: what a
correct GPT gives on the same weights and inputs (a pre-norm block computes
what nn.TransformerEncoderLayer(norm_first=True, activation="gelu",
dim_feedforward=4 * d_model) computes with a causal mask), and what the
usual mistakes give, to name yours. The values are in coursekit/fixtures,
generated from the reference by the instructor.
"""
import functools

import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load as load_fixture
from coursekit.probes import gpt as probes
from coursekit.probes import stacks
from coursekit.probes.modules import load_weights
from coursekit.probes.placement import forward_placement

BLOCK = {"d_model": 8, "num_heads": 2, "context_length": 6}
MODEL = {"vocab_size": 11, "context_length": 6, "d_model": 8, "num_heads": 2, "num_layers": 2}


@functools.cache
def stored() -> dict[str, torch.Tensor]:
    """The stored values, by key (read on first use)."""
    return load_fixture("gpt_12")


# The public inputs (grader/fixtures.py stores what they give: keep both in step).
BLOCK_CASES = [(8, 2, 6, 6, False), (8, 2, 6, 3, False), (12, 3, 9, 5, True), (6, 1, 4, 1, False)]
BLOCK_MISTAKES = (("post-norm", "post-norm-block"), ("residual-after-norm", "residual-after-norm"),
                  ("gelu-tanh", "gelu-tanh"))
LOGIT_CONFIGS = {
    "tied": MODEL,
    "untied-qkv-bias": {**MODEL, "num_layers": 1, "qkv_bias": True, "tie_weights": False},
    "three-layers": {"vocab_size": 7, "context_length": 5, "d_model": 12, "num_heads": 3, "num_layers": 3},
}
SHORT_LENGTHS = [1, 3, 5]
DROPOUT = {**MODEL, "dropout": 0.5}


def tokens(seed: int, batch: int, n: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


def expect_weights_fit(load: dict, what: str) -> None:
    """Every weight in the contract's names found its place in yours, and yours has no other."""
    lacking, extra = load["unexpected"], load["missing"]
    plain_list = lacking and not extra and all(name.startswith("blocks.") for name in lacking)
    expect.that(
        not lacking and not extra, what=f"{what}: weights by the contract's parameter names",
        expected="each one loads into a parameter of yours of the same name, and you have no others",
        actual=(f"you have no parameter named {', '.join(lacking[:6]) or '-'}; "
                f"you have extra parameters {', '.join(extra[:6]) or '-'}"),
        pitfalls=["plain-list-layers"] if plain_list else [],
    )


def block_config(d_model: int, num_heads: int, context_length: int, qkv_bias: bool = False) -> dict:
    return {"d_model": d_model, "num_heads": num_heads, "context_length": context_length, "qkv_bias": qkv_bias}


def block_case(d_model: int, num_heads: int, context_length: int, n: int, qkv_bias: bool) -> tuple[str, dict, int, torch.Tensor]:
    """(fixture key, config, weight seed, x) of a block case."""
    x = torch.randn(2, n, d_model, generator=torch.Generator().manual_seed(n))
    return (f"block {d_model} {num_heads} {context_length} {n} {qkv_bias}",
            block_config(d_model, num_heads, context_length, qkv_bias), d_model + n, x)


def logits_case(name: str) -> tuple[dict, int, torch.Tensor]:
    config = LOGIT_CONFIGS[name]
    return config, 5, tokens(6, 3, config["context_length"], config["vocab_size"])


def short_case(n: int) -> tuple[dict, int, torch.Tensor]:
    return MODEL, 7, tokens(7, 2, n, MODEL["vocab_size"])


def dropout_case() -> tuple[dict, int, torch.Tensor]:
    return DROPOUT, 13, tokens(13, 2, 6, MODEL["vocab_size"])


def block_mistakes(key: str, got: torch.Tensor):
    """Which other arrangement of the same sublayers your output equals."""
    def diagnose():
        for arrangement, pitfall in BLOCK_MISTAKES:
            if torch.allclose(got, stored()[f"{key} {arrangement}"], atol=1e-5):
                yield pitfall
    return diagnose


# --- GPTBlock -----------------------------------------------------------------

def test_block_has_the_contract_submodules(student):
    info = stacks.structure(student, "GPTBlock", BLOCK)
    expected = {"norm1": "LayerNorm", "norm2": "LayerNorm", "attn": "(a module)", "ff": "(a module)",
                "drop": "Dropout"}
    got = {name: info["attributes"].get(name, "(missing)") for name in expected}
    for name in ("attn", "ff"):  # any class: its parameter names and what it computes are what count
        if got[name] != "(missing)":
            got[name] = "(a module)"
    expect.equal(got, expected, what="sub-modules of GPTBlock(8, 2, 6), by attribute name")
    shared = [names for names in info["aliases"] if any(name.startswith("norm") for name in names)]
    expect.that(not shared, what="norm1 and norm2", expected="two separate nn.LayerNorm objects",
                actual="one object under the names " + "; ".join(" = ".join(names) for names in shared))
    expect.equal(sorted(info["parameters"]), sorted(probes.block_shapes(8, False)),
                 what="parameter names of GPTBlock(8, 2, 6) (ff = Linear, GELU, Linear: ff.0 and ff.2)")


@pytest.mark.parametrize("d_model,num_heads,context_length,n,qkv_bias", BLOCK_CASES)
def test_block_matches_torch_prenorm_layer(student, d_model, num_heads, context_length, n, qkv_bias):
    key, config, seed, x = block_case(d_model, num_heads, context_length, n, qkv_bias)
    what = f"GPTBlock({d_model}, {num_heads}, context_length={context_length}, qkv_bias={qkv_bias}) on x of shape {(2, n, d_model)}"
    with expect.no_error(what=what, pitfalls=["mask-no-slice"], match="size of tensor a"):
        result = probes.block_output(student, config, seed, x)
    expect_weights_fit(result["load"], what)
    expect.close(result["output"], stored()[f"{key} pre-norm"], atol=1e-5,
                 what=what + " vs nn.TransformerEncoderLayer(norm_first=True, activation='gelu') with a causal mask",
                 diagnose=block_mistakes(key, result["output"]))
    expect.that(result["inputs_unchanged"], what="x after the call", expected="unchanged", actual="modified in place")


def test_block_residual_stream_is_not_normalised(student):
    # With both branches silenced (out_proj and the last Linear of ff set to
    # zero), a pre-norm block is the identity: the stream goes through untouched.
    weights = probes.block_weights(BLOCK, seed=3)
    for name in ("attn.out_proj.weight", "attn.out_proj.bias", "ff.2.weight", "ff.2.bias"):
        weights[name] = torch.zeros_like(weights[name])
    block = stacks.build(student, "GPTBlock", BLOCK)
    load_weights(block, weights)
    x = 3.0 * torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(4)) + 1.0
    with torch.no_grad():
        out = block.eval()(x)
    expect.close(out, x, atol=1e-6, what="GPTBlock whose branches output zeros: x + 0 + 0 must give back x "
                                          "(no LayerNorm may act on the stream itself)")


# --- GPT ------------------------------------------------------------------------

def test_gpt_has_the_contract_submodules(student):
    info = probes.structure(student, {**MODEL, "num_layers": 3})
    expect.modules_registered(info["hidden_lists"], what="the blocks of GPT(num_layers=3)")
    expected = {"tok_emb": "Embedding", "pos_emb": "Embedding", "drop": "Dropout", "blocks": "ModuleList",
                "final_norm": "LayerNorm", "head": "Linear"}
    expect.equal(info["children"], expected, what="sub-modules of GPT, by attribute name",
                 pitfalls=["plain-list-layers"] if info["children"].get("blocks") in ("list", "tuple") else [])
    blocks = info["blocks"]
    expect.equal((blocks["length"], blocks["classes"]), (3, ["GPTBlock"]), what="(len, classes) of GPT(num_layers=3).blocks")
    expect.that(blocks["distinct"] == 3, what="the 3 blocks of GPT(num_layers=3)",
                expected="3 separate GPTBlock objects, each with its own weights",
                actual=f"only {blocks['distinct']} distinct object(s): `[block] * n` repeats one block",
                pitfalls=["repeated-layer"])
    expect.equal(info["head_bias"], False, what="head has a bias (it must be nn.Linear(d_model, vocab_size, bias=False))")


@pytest.mark.parametrize("name", LOGIT_CONFIGS)
def test_gpt_logits_match_torch(student, name):
    config, seed, idx = logits_case(name)
    result = probes.logits(student, config, seed, idx)
    what = f"GPT({', '.join(f'{k}={v}' for k, v in config.items())}) on idx of shape {tuple(idx.shape)}"
    expect_weights_fit(result["load"], what)

    def diagnose():
        if torch.allclose(result["logits"], stored()[f"logits {name} no-final-norm"], atol=1e-4):
            yield "final-norm-missing"

    expect.close(result["logits"], stored()[f"logits {name}"], atol=1e-4,
                 what=what + ": logits vs token + position embeddings, PyTorch's pre-norm layers, "
                             "final LayerNorm, head", diagnose=diagnose)
    expect.that(result["repeatable"], what="two calls in eval mode", expected="the same logits",
                actual="different logits", pitfalls=["dropout-in-eval"])
    expect.that(result["inputs_unchanged"], what="idx after the call", expected="unchanged", actual="modified")


@pytest.mark.parametrize("n", SHORT_LENGTHS)
def test_shorter_inputs_use_positions_from_zero(student, n):
    config, seed, idx = short_case(n)  # context_length 6
    what = f"GPT(context_length=6) on idx of shape {tuple(idx.shape)}: positions 0..{n - 1}"
    try:
        result = probes.logits(student, config, seed, idx)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - explained below
        seen = probes.positions_seen(student, config, idx)
        wrong_positions = seen is not None and seen != list(range(n))
        expect.that(False, what=what, expected="logits of shape (2, n, vocab_size)",
                    actual=(f"{type(exc).__name__} after pos_emb was given positions {seen}" if wrong_positions
                            else f"{type(exc).__name__}: {exc}"),
                    pitfalls=["pos-emb-positions"] if wrong_positions else ["mask-no-slice"])
    if result["positions"] is not None:
        expect.equal(result["positions"], list(range(n)), what="the positions looked up in pos_emb",
                     pitfalls=["pos-emb-positions"])

    def diagnose():  # positions counted from the end of the context, as if the input filled it
        if torch.allclose(result["logits"], stored()[f"positions {n} late"], atol=1e-4):
            yield "pos-emb-positions"

    expect.close(result["logits"], stored()[f"positions {n}"], atol=1e-4, what=what, diagnose=diagnose)


def test_later_tokens_never_change_earlier_logits(student):
    idx = tokens(8, 2, 6, MODEL["vocab_size"])
    for t in (1, 3, 5):
        other = idx.clone()
        other[:, t:] = (idx[:, t:] + 1 + torch.arange(6 - t)) % MODEL["vocab_size"]
        result = probes.causal(student, MODEL, 8, idx, other, t)
        expect.that(result["earlier_unchanged"], what=f"logits at positions 0..{t - 1} when tokens {t}..5 change",
                    expected="unchanged (a token sees only itself and the tokens before it)", actual="changed")
        expect.that(result["later_changed"], what=f"logits at positions {t}..5 when tokens {t}..5 change",
                    expected="changed", actual="unchanged")


def test_too_long_input_raises_value_error(student):
    result = probes.too_long(student, MODEL, tokens(9, 1, 7, MODEL["vocab_size"]))
    expect.equal(result["type"], "ValueError", what="GPT(context_length=6) on 7 tokens: the exception raised")


def test_tied_head_and_embedding_are_one_parameter(student):
    # One SGD step: a Parameter used twice gets the sum of both uses'
    # gradients, and both names show the same, moved values. A copy moves
    # on its own and the two drift apart.
    idx = tokens(10, 2, 6, MODEL["vocab_size"])
    upstream = torch.randn(2, 6, MODEL["vocab_size"], generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    result = probes.tying(student, MODEL, 10, idx, upstream)
    expect.close(result["head"], result["tok_emb"], atol=0, rtol=0, check_dtype=False,
                 what="head.weight vs tok_emb.weight after one optimiser step (tie_weights=True)",
                 pitfalls=["tie-by-copy"])
    copied = result["n_parameters"] - result["expected_n_parameters"] == MODEL["vocab_size"] * MODEL["d_model"]
    expect.equal(result["n_parameters"], result["expected_n_parameters"],
                 what="number of parameter values the optimiser sees (tie_weights=True: the shared matrix once)",
                 pitfalls=["tie-by-copy"] if copied else [])


def test_untied_head_is_its_own_parameter(student):
    config = {**MODEL, "tie_weights": False}
    idx = tokens(11, 2, 6, MODEL["vocab_size"])
    upstream = torch.randn(2, 6, MODEL["vocab_size"], generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    result = probes.tying(student, config, 11, idx, upstream)
    expect.that(not torch.equal(result["head"], result["tok_emb"]),
                what="head.weight vs tok_emb.weight after one optimiser step (tie_weights=False)",
                expected="different (two parameters)", actual="equal")
    expect.equal(result["n_parameters"], result["expected_n_parameters"],
                 what="number of parameters of GPT(tie_weights=False)")


def test_gradients_reach_every_parameter(student):
    for tie in (True, False):
        config = {**MODEL, "tie_weights": tie}
        idx = tokens(12, 2, 6, MODEL["vocab_size"])
        upstream = torch.randn(2, 6, MODEL["vocab_size"], generator=torch.Generator().manual_seed(12), dtype=torch.float64)
        reach = probes.gradient_reach(student, config, 12, idx, upstream)
        missing = [name for name, got in reach.items() if not got]
        expect.gradients_reach_all(reach, what=f"gradients of GPT's parameters (tie_weights={tie})",
                                   pitfalls=["final-norm-missing"] if any("final_norm" in m for m in missing) else [])


def test_dropout_only_in_training(student):
    config, seed, idx = dropout_case()
    result = probes.dropout_modes(student, config, seed, idx)
    expect.that(result["train_varies"], what="GPT(dropout=0.5) in train mode, two seeds",
                expected="different logits (dropout is random)", actual="identical logits")
    expect.that(result["eval_repeatable"], what="GPT(dropout=0.5) in eval mode, two seeds",
                expected="identical logits (no dropout)", actual="different logits",
                pitfalls=["plain-list-layers"] if result["hidden_lists"] else ["dropout-in-eval"])
    expect.that(torch.allclose(result["eval"], stored()["dropout eval"], atol=1e-4), what="GPT(dropout=0.5) in eval mode",
                expected="the logits of the same model without dropout", actual="other logits")
    # Every dropout of one shape drops the same entries here, however it is
    # called: what differs is where the dropouts act.
    expect.close(result["train_fixed"], stored()["dropout train fixed"], atol=1e-4,
                 what="GPT(dropout=0.5) in train mode under fixed dropout masks (dropout on the "
                      "embeddings, the attention weights and each sublayer's output)",
                 pitfalls=["dropout-on-residual-sum"])


def test_runs_on_the_inputs_device(student):
    # PyTorch's meta device stands in for a GPU: a tensor created without
    # device= lands on the CPU and meets the inputs' device, as on a GPU.
    result = forward_placement(student, "GPT", MODEL, [tokens(14, 2, 6, MODEL["vocab_size"])])
    expect.equal(result["placement"], "ok",
                 what="GPT and idx on the meta device: every tensor of the forward pass on idx's device "
                      f"(create positions with device=idx.device) {result['detail']}".rstrip())


def test_uses_no_builtin_attention(student):
    probes.logits(student, MODEL, 0, tokens(15, 1, 6, MODEL["vocab_size"]))  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="use the shipped MultiHeadAttention")
