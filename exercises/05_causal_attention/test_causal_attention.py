"""Public tests for exercise 05. Run: pytest exercises/05_causal_attention

The expected values come from PyTorch itself: F.scaled_dot_product_attention
with is_causal=True, fed with projections made from the same weights that
are copied into your module (so the tests never depend on how your __init__
draws its random numbers), and from the numbers printed in the README's worked example.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coursekit import expect
from coursekit.probes import causal_attention as probe
from coursekit.probes.placement import forward_placement

# Seed 001, section 2.2: "Your journey starts with one step", one 3-d vector per word.
SEED_INPUTS = torch.tensor([
    [0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55],
])
# Seed 001, section 2.4 (1): the causal attention weights it prints.
SEED_CAUSAL_WEIGHTS = torch.tensor([
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
    [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
    [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
])
# Seed 001, section 2.3 (3): SelfAttention_v2's context vector for "step",
# the last token, which sees every token, so causal attention changes nothing.
SEED_LAST_CONTEXT = torch.tensor([-0.0754, 0.0693])


# ---------------------------------------------------------------- oracles

def _project(x, weights, name):
    return F.linear(x, weights[f"{name}.weight"], weights.get(f"{name}.bias"))


def oracle(x, weights):
    """PyTorch's causal attention (its mask sense is the opposite of ours,
    but is_causal=True needs no mask from us)."""
    q, k, v = (_project(x, weights, name) for name in probe.PROJECTIONS)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def oracle_weights(x, weights):
    """The causal attention weights: with the identity matrix as values,
    attention returns the weight matrix itself."""
    q, k = _project(x, weights, "W_query"), _project(x, weights, "W_key")
    n = x.size(-2)
    identity = torch.eye(n, dtype=x.dtype).expand(*q.shape[:-1], n)
    return F.scaled_dot_product_attention(q, k, identity, is_causal=True)


def _inputs(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------- helpers

def _loaded(result):
    load = result["load"]
    missing = [name for name in load["missing"] if name != "mask"]  # the buffer is not a weight
    expect.that(
        not missing and not load["unexpected"],
        what="copying the test's weights into your module with load_state_dict",
        expected="parameters W_query.weight, W_key.weight, W_value.weight (and .bias with qkv_bias=True), "
                 "i.e. three nn.Linear attributes",
        actual=f"missing {missing}, unexpected {load['unexpected']}",
    )


def _suspects(weights):
    """The pitfalls that attention weights (batch, n, n) point at; both mask
    pitfalls when the weights are unknown (None)."""
    if weights is None:
        return ["mask-off-by-one", "mask-after-softmax"]
    found = probe.weight_symptoms(weights)
    suspects = []
    if found["diagonal_zero"] or found["nan"]:
        suspects.append("mask-off-by-one")
    if not found["rows_sum_to_one"]:
        suspects.append("mask-after-softmax")
    return suspects


def _seen(result):
    """The weights your forward passed to self.dropout, if it called it."""
    return result["weights_in"][0] if result["weights_in"] else None


# ---------------------------------------------------------------- structure

@pytest.mark.parametrize("qkv_bias", [False, True])
def test_constructor_creates_the_layers(student, qkv_bias):
    found = probe.structure(student, 5, 3, 7, 0.25, qkv_bias=qkv_bias)
    expected = {}
    for name in probe.PROJECTIONS:
        expected[f"{name}.weight"] = [3, 5]
        if qkv_bias:
            expected[f"{name}.bias"] = [3]
    expect.equal(found["parameters"], expected,
                 what=f"parameters of CausalAttention(5, 3, 7, 0.25, qkv_bias={qkv_bias}) (name: shape)")
    expect.equal(
        found["children"], {"W_query": "Linear", "W_key": "Linear", "W_value": "Linear", "dropout": "Dropout"},
        what="sub-modules (name: type)",
    )
    expect.equal(found["dropout_p"], 0.25, what="self.dropout.p")


def test_mask_is_a_registered_bool_buffer(student):
    found = probe.structure(student, 5, 3, 7, 0.0)
    expect.that(
        "mask" in found["buffers"], what="self.mask after __init__",
        expected="a buffer registered with self.register_buffer('mask', ...)",
        actual="a plain tensor attribute: not in buffers() or state_dict()" if "mask" in found["tensor_attributes"]
        else f"no buffer named 'mask' (buffers: {sorted(found['buffers'])})",
        pitfalls=["mask-not-buffer"],
    )
    expect.equal(
        found["buffers"]["mask"], {"shape": [7, 7], "dtype": "torch.bool", "persistent": True},
        what="the mask buffer for context_length=7 (masked_fill needs a bool mask)",
    )


def test_mask_blocks_exactly_the_future(student):
    found = probe.structure(student, 5, 3, 5, 0.0)
    mask = found["mask"]
    expect.that(mask is not None, what="self.mask", expected="a bool tensor", actual="missing")
    expect.close(
        mask, torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1),
        what="self.mask for context_length=5: True strictly above the diagonal (1 = True)",
        pitfalls=["mask-off-by-one"], check_dtype=False,  # the dtype has its own test
    )


# ---------------------------------------------------------------- values

def test_seed_worked_example(student):
    # The seed's SelfAttention_v2 weights: torch.manual_seed(789), then three
    # nn.Linear(3, 2, bias=False) for query, key and value, in that order.
    with torch.random.fork_rng():
        torch.manual_seed(789)
        layers = [nn.Linear(3, 2, bias=False) for _ in probe.PROJECTIONS]
    weights = {f"{name}.weight": layer.weight.detach() for name, layer in zip(probe.PROJECTIONS, layers)}
    batch = torch.stack((SEED_INPUTS, SEED_INPUTS))  # (2, 6, 3), as in the seed
    result = probe.forward(student, batch, d_out=2, context_length=6, weights=weights)
    _loaded(result)
    output = result["outputs"][0]
    expect.shape(output, (2, 6, 2), what="CausalAttention(3, 2, 6, 0.0) on the README's batch of shape (2, 6, 3)")
    values = _project(SEED_INPUTS, weights, "W_value")
    for row in (0, 1):
        expect.close(
            output[row], SEED_CAUSAL_WEIGHTS @ values, atol=2e-4, rtol=0,
            what=f"context vectors of batch item {row}: the causal weights printed in the README's worked example, "
                 "times the values",
            pitfalls=_suspects(_seen(result)),
        )
    expect.close(
        output[0, -1], SEED_LAST_CONTEXT, atol=1e-4, rtol=0,
        what="context vector of the last token ('step'), which sees the whole sentence",
    )


CONFIGS = {
    # name: (batch, n, d_in, d_out, context_length, qkv_bias)
    "seed-sizes": (2, 6, 3, 2, 6, False),
    "bias": (3, 5, 8, 4, 5, True),
    "shorter-input": (2, 4, 5, 3, 7, False),
}


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
def test_matches_pytorch_causal_attention(student, config):
    b, n, d_in, d_out, context_length, qkv_bias = CONFIGS[config]
    x = _inputs(b, n, d_in, seed=10 + n)
    weights = probe.random_weights(d_in, d_out, qkv_bias, seed=n)
    result = probe.forward(student, x, d_out=d_out, context_length=context_length, qkv_bias=qkv_bias,
                           weights=weights)
    _loaded(result)
    expect.close(
        result["outputs"][0], oracle(x, weights), atol=1e-5,
        what=f"output for x of shape {tuple(x.shape)}, context_length={context_length}, qkv_bias={qkv_bias} "
             "(oracle: F.scaled_dot_product_attention(q, k, v, is_causal=True))",
        pitfalls=_suspects(_seen(result)),
    )


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_attention_weights_are_causal_and_normalised(student, qkv_bias):
    # Inputs and weights chosen so that the values are the identity matrix:
    # the output is then the attention weight matrix itself.
    x, weights = probe.revealing_setup(2, 5, qkv_bias=qkv_bias, seed=20)
    result = probe.forward(student, x, d_out=5, context_length=6, qkv_bias=qkv_bias, weights=weights)
    _loaded(result)
    attn = result["outputs"][0]
    expect.shape(attn, (2, 5, 5), what="attention weights (batch, n, n)")
    found = probe.weight_symptoms(attn)
    expect.that(found["future_is_zero"], what="weights on future tokens (above the diagonal)",
                expected="exactly 0 (their scores are -inf before the softmax)", actual="some are not 0")
    expect.that(found["rows_sum_to_one"] and not found["nan"], what="each query's weights (one row) summed",
                expected="1 for every row", actual="NaN rows" if found["nan"] else "rows that do not sum to 1",
                pitfalls=_suspects(attn))
    expect.close(attn, oracle_weights(x, weights), atol=1e-5,
                 what="attention weights, (batch, n, n)", pitfalls=_suspects(attn))


def test_first_token_sees_only_itself(student):
    x = _inputs(3, 4, 5, seed=30)
    weights = probe.random_weights(5, 2, seed=30)
    result = probe.forward(student, x, d_out=2, context_length=4, weights=weights)
    expect.close(
        result["outputs"][0][:, 0], _project(x, weights, "W_value")[:, 0], atol=1e-5,
        what="output of the first token: it sees only itself, so it equals its own value vector",
        pitfalls=_suspects(_seen(result)),
    )


def test_unbatched_input(student):
    x = _inputs(5, 4, seed=40)
    weights = probe.random_weights(4, 3, seed=40)
    result, error = None, ""
    try:
        result = probe.forward(student, x, d_out=3, context_length=6, weights=weights)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - say what happened instead of a traceback
        error = f"{type(exc).__name__}: {exc}"
    expect.that(result is not None, what="forward on an unbatched input of shape (5, 4)",
                expected="an output of shape (5, 3); count dimensions from the end (x.size(-2), "
                         "transpose(-2, -1)) instead of unpacking x.shape",
                actual=error)
    expect.close(result["outputs"][0], oracle(x.unsqueeze(0), weights)[0], atol=1e-5,
                 what="output for an unbatched (5, 4) input", pitfalls=_suspects(_seen(result)))


def test_too_long_input_raises_value_error(student):
    found = probe.raised(student, _inputs(2, 6, 3, seed=50), d_out=2, context_length=4)
    expect.that(
        found["raised"] == "ValueError",
        what="CausalAttention(3, 2, context_length=4, ...) on an input with 6 tokens",
        expected="ValueError, raised by forward itself: compare x.size(-2) with context_length first",
        actual=f"{found['raised']} (from a later operation)" if found["raised"]
        else f"no exception: an output of shape {tuple(found['output_shape'])}",
    )


def test_calling_twice_leaves_the_mask_alone(student):
    x = _inputs(2, 5, 4, seed=60)
    x_copy = x.clone()
    result = probe.forward(student, x, d_out=3, context_length=5, weights=probe.random_weights(4, 3, seed=60),
                           calls=2)
    expect.close(result["outputs"][1], result["outputs"][0],
                 what="output of a second call on the same input (eval mode)", pitfalls=["mask-inplace-buffer"])
    expect.that(result["mask_before"] is not None and result["mask_after"] is not None
                and torch.equal(result["mask_before"], result["mask_after"]),
                what="self.mask after two forward calls", expected="unchanged", actual="modified in place",
                pitfalls=["mask-inplace-buffer"])
    expect.that(torch.equal(x, x_copy), what="the input x after the calls", expected="unchanged",
                actual="modified in place")


# ---------------------------------------------------------------- dropout

def test_eval_mode_applies_no_dropout(student):
    # Compared with your own output without dropout, so that only dropout is tested here.
    x = _inputs(2, 6, 4, seed=70)
    weights = probe.random_weights(4, 3, seed=70)
    base = probe.forward(student, x, d_out=3, context_length=6, dropout=0.0, weights=weights)["outputs"][0]
    for seed in (0, 1):
        result = probe.forward(student, x, d_out=3, context_length=6, dropout=0.5, weights=weights,
                               train=False, seed=seed)
        expect.close(
            result["outputs"][0], base, atol=1e-6,
            what=f"eval-mode output with dropout=0.5 under torch.manual_seed({seed}), "
                 "compared with your output for dropout=0.0",
            pitfalls=["dropout-in-eval"],
        )


def test_train_mode_applies_dropout_to_the_weights(student):
    # With the values equal to the identity the output is the weight matrix,
    # so dropout on the weights shows directly. The reference is your own
    # result without dropout, so only dropout is tested here.
    x, weights = probe.revealing_setup(2, 6, seed=80)
    config = dict(d_out=6, context_length=6, weights=weights)
    clean = probe.forward(student, x, dropout=0.0, **config)["outputs"][0]
    runs = [probe.forward(student, x, dropout=0.5, train=True, seed=s, **config)["outputs"][0] for s in (0, 1)]
    expect.that(not torch.equal(runs[0], runs[1]),
                what="train-mode outputs with dropout=0.5 under torch.manual_seed(0) and torch.manual_seed(1)",
                expected="different (dropout zeroes different weights)", actual="identical: no dropout happened",
                pitfalls=["dropout-typo"])
    torch.manual_seed(0)  # the same random draw as your forward: seed, then dropout on the (b, n, n) weights
    expect.close(
        runs[0], F.dropout(clean, p=0.5, training=True), atol=1e-6,
        what="train-mode weights with dropout=0.5 under torch.manual_seed(0): dropout applied once to the "
             "softmax weights (kept ones scaled by 1/(1-p) = 2)",
        pitfalls=["dropout-typo"],
    )


# ---------------------------------------------------------------- module plumbing

def test_gradients_reach_every_parameter(student):
    x = _inputs(2, 5, 4, seed=100)
    weights = probe.random_weights(4, 3, qkv_bias=True, seed=100)
    found = probe.gradients(student, x, d_out=3, context_length=5, weights=weights)
    x_ref = x.clone().requires_grad_(True)
    upstream = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))  # as in the probe
    (oracle(x_ref, weights) * upstream).sum().backward()
    expect.close(found["input_grad"], x_ref.grad, atol=1e-5, what="gradient of the output with respect to x")
    expect.gradients_reach_all(found["reach"])


def test_to_float64_converts_parameters_and_keeps_a_bool_mask(student):
    x = _inputs(2, 5, 4, seed=110, dtype=torch.float64)
    weights = probe.random_weights(4, 3, seed=110, dtype=torch.float64)
    found = probe.after_to(student, x, d_out=3, context_length=6, dtype=torch.float64, weights=weights)
    expected = {f"{name}.weight": "torch.float64" for name in probe.PROJECTIONS} | {"mask": "torch.bool"}
    expect.equal(found["dtypes"], expected, what="dtypes after module.to(torch.float64)")
    expect.close(found["output"], oracle(x, weights), atol=1e-10, what="output of the float64 module")


def test_to_device_moves_the_mask(student):
    # The 'meta' device stands in for a GPU: .to() moves what is registered.
    found = probe.devices(student, 4, 3, 6, device="meta")
    left = sorted(name for name, device in found.items() if device != "meta")
    expect.that(not left, what="tensors after module.to(device)", expected="all moved",
                actual="left behind: " + ", ".join(left), pitfalls=["mask-not-buffer"])


def test_forward_creates_its_tensors_on_the_inputs_device(student):
    # On the CPU first, then module.to('meta') on an input moved to 'meta'.
    x = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(8))
    found = forward_placement(student, "CausalAttention", {}, [x], init_args=[5, 3, 6, 0.0])
    expect.that(found["placement"] != "mismatch", what="CausalAttention(5, 3, 6, 0.0).to('meta') on an input on "
                "'meta' (a device that stands in for a GPU here)",
                expected="it runs: the mask comes from the registered buffer (self.mask[:n, :n]), or is made "
                "with device=x.device", actual=found["detail"], pitfalls=["mask-not-buffer", "mask-cpu-loop"])


def test_uses_no_builtin_attention(student):
    probe.structure(student, 3, 2, 4, 0.0)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="compute the scores, mask, softmax and dropout yourself")
