"""Public tests for exercise 04. Run: pytest exercises/04_self_attention"""

import pytest
import torch
import torch.nn.functional as F

from coursekit import expect
from coursekit.probes.self_attention import after_to, forward_output, gradients, make_weights, per_example, structure

# Seed 001, section 2.3: "Your journey starts with one step", d_in = 3, d_out = 2.
INPUTS = torch.tensor([
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
])
# SelfAttention_v1 under torch.manual_seed(123): W_query, W_key, W_value = torch.rand(3, 2) each.
V1_OUTPUT = torch.tensor([[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                          [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
# SelfAttention_v2 under torch.manual_seed(789): the nn.Linear weights that seed draws,
# written out so that the test does not depend on the order in which you create layers.
V2_WEIGHTS = {
    "W_query.weight": torch.tensor([[0.31605908274650574, 0.45680856704711914, 0.5118348598480225],
                                    [-0.16828539967536926, -0.3378770351409912, -0.0917738676071167]]),
    "W_key.weight": torch.tensor([[0.4058058261871338, -0.4704205393791199, 0.23680520057678223],
                                  [0.2133607417345047, -0.2600506544113159, -0.5105429887771606]]),
    "W_value.weight": torch.tensor([[0.25256988406181335, -0.1414782702922821, -0.19618134200572968],
                                    [0.5191074013710022, -0.08516757935285568, -0.2043270468711853]]),
}
V2_OUTPUT = torch.tensor([[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                          [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])


def randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def v1_weights():
    """The seed's (d_in, d_out) matrices, stored the nn.Linear way: weight = W.T."""
    gen = torch.Generator().manual_seed(123)
    return {f"{name}.weight": torch.rand(3, 2, generator=gen).T for name in ("W_query", "W_key", "W_value")}


def pytorch_attention(weights, x):
    """The same computation from PyTorch's own pieces: F.linear for the
    projections, F.scaled_dot_product_attention for the rest."""
    q, k, v = (F.linear(x, weights[f"{n}.weight"], weights.get(f"{n}.bias")) for n in ("W_query", "W_key", "W_value"))
    return F.scaled_dot_product_attention(q, k, v)


def check_loaded(result, what):
    """The weights were copied into W_query, W_key and W_value by name."""
    expect.equal(result["load"], {"missing": [], "unexpected": []},
                 what=f"names of the parameters of {what} (load_state_dict of W_query.weight, W_key.weight, ...)",
                 pitfalls=["plain-list-layers"] if result["hidden_lists"] else [])


# The errors PyTorch raises when `.T` has moved the batch dim of a 3-D tensor.
T_ERRORS = r"must match the size of tensor b|first two dimensions of batch2|shapes cannot be multiplied"


def batched_input(what):
    """A shape error on batched input (when unbatched input works) is the classic `.T` mistake."""
    return expect.no_error(what=what, pitfalls=["transpose-T-3d"], match=T_ERRORS)


@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no_bias", "bias"])
def test_has_three_linear_projections(student, qkv_bias):
    found = structure(student, 5, 4, qkv_bias=qkv_bias)
    what = f"SelfAttention(5, 4, qkv_bias={qkv_bias})"
    expect.that(found["is_module"], what=what, expected="an nn.Module", actual="not an nn.Module")
    expect.modules_registered(found["hidden_lists"], what=f"sub-modules of {what}")
    layer = {"type": "Linear", "in_features": 5, "out_features": 4, "bias": qkv_bias}
    expect.equal(found["layers"], {"W_query": layer, "W_key": layer, "W_value": layer},
                 what=f"the attributes W_query, W_key, W_value of {what}")
    shapes = {f"{n}.weight": [4, 5] for n in ("W_query", "W_key", "W_value")}
    shapes.update({f"{n}.bias": [4] for n in ("W_query", "W_key", "W_value")} if qkv_bias else {})
    expect.equal(found["registered"]["parameters"], shapes, what=f"parameters() of {what}")


def test_seed_example_v1(student):
    result = forward_output(student, v1_weights(), INPUTS)
    check_loaded(result, "SelfAttention(3, 2)")
    expect.close(result["output"], V1_OUTPUT, atol=1e-4, pitfalls=["missing-scale"],
                 what="output for the README's six words with SelfAttention_v1's weights (README, torch.manual_seed(123))")


def test_seed_example_v2(student):
    result = forward_output(student, V2_WEIGHTS, INPUTS)
    check_loaded(result, "SelfAttention(3, 2)")
    expect.close(result["output"], V2_OUTPUT, atol=1e-4, pitfalls=["missing-scale"],
                 what="output for the README's six words with SelfAttention_v2's weights (README, torch.manual_seed(789))")


@pytest.mark.parametrize("batch,n,d_in,d_out,qkv_bias,scale", [
    (2, 4, 3, 2, False, 1.0),
    (3, 5, 6, 4, True, 1.0),
    (2, 6, 16, 16, False, 3.0),  # large scores: without 1/sqrt(d_k) the softmax saturates
], ids=["small", "bias", "large_scores"])
def test_matches_pytorch_attention(student, batch, n, d_in, d_out, qkv_bias, scale):
    weights = make_weights(d_in, d_out, qkv_bias, seed=n, scale=scale)
    x = randn(batch, n, d_in, seed=10 + n)
    what = f"SelfAttention({d_in}, {d_out}, qkv_bias={qkv_bias}) on a ({batch}, {n}, {d_in}) batch"
    with batched_input(what):
        result = forward_output(student, weights, x)
    check_loaded(result, what)
    expect.shape(result["output"], (batch, n, d_out), what=what, pitfalls=["transpose-T-3d"])
    expect.close(result["output"], pytorch_attention(weights, x), what=what, pitfalls=["missing-scale"])


@pytest.mark.parametrize("batch,n,d_in,d_out", [(2, 4, 3, 2), (3, 3, 5, 3)], ids=str)
def test_a_batch_equals_each_example_alone(student, batch, n, d_in, d_out):
    # (3, 3, 5, 3): batch, tokens and d_out of the same size, where `.T` raises no error.
    weights = make_weights(d_in, d_out, seed=20)
    x = randn(batch, n, d_in, seed=21)
    what = f"SelfAttention({d_in}, {d_out}) on a ({batch}, {n}, {d_in}) batch"
    with batched_input(what):
        result = per_example(student, weights, x)
    check_loaded(result, what)
    expect.shape(result["batched"], (batch, n, d_out), what=what, pitfalls=["transpose-T-3d"])
    expect.close(result["batched"], result["per_example"], pitfalls=["transpose-T-3d"],
                 what=f"{what}, compared with each unbatched ({n}, {d_in}) example on its own")


def test_unbatched_input(student):
    weights = make_weights(4, 3, qkv_bias=True, seed=30)
    x = randn(5, 4, seed=31)
    result = forward_output(student, weights, x)
    check_loaded(result, "SelfAttention(4, 3, qkv_bias=True)")
    expect.shape(result["output"], (5, 3), what="SelfAttention(4, 3) on an unbatched (5, 4) input")
    expect.close(result["output"], pytorch_attention(weights, x), pitfalls=["missing-scale"],
                 what="SelfAttention(4, 3, qkv_bias=True) on an unbatched (5, 4) input")


def test_gradients_match_pytorch(student):
    weights = make_weights(4, 3, qkv_bias=True, seed=40)
    x, upstream = randn(2, 5, 4, seed=41), randn(2, 5, 3, seed=42)
    with batched_input("backward through SelfAttention(4, 3) on a (2, 5, 4) batch"):
        got = gradients(student, weights, x, upstream)
    check_loaded(got, "SelfAttention(4, 3, qkv_bias=True)")
    reached = {name: grad is not None and bool(grad.abs().sum() > 0) for name, grad in got["parameters"].items()}
    expect.gradients_reach_all(reached, what="gradients of the parameters after backward()")
    ref_weights = {name: w.clone().requires_grad_(True) for name, w in weights.items()}
    x_ref = x.clone().requires_grad_(True)
    (pytorch_attention(ref_weights, x_ref) * upstream).sum().backward()
    expect.close(got["input"], x_ref.grad, what="gradient with respect to the input", pitfalls=["missing-scale"])
    for name, w in ref_weights.items():
        expect.close(got["parameters"][name], w.grad, what=f"gradient of {name}", pitfalls=["missing-scale"])


def test_to_float64_moves_every_parameter(student):
    weights = make_weights(4, 3, qkv_bias=True, seed=50)
    x = randn(2, 3, 4, seed=51)
    with batched_input("SelfAttention(4, 3) on a (2, 3, 4) batch"):
        check_loaded(forward_output(student, weights, x), "SelfAttention(4, 3, qkv_bias=True)")
        result = after_to(student, weights, x, torch.float64)
    expect.equal(sorted(set(result["dtypes"].values())), ["torch.float64"],
                 what="dtypes of the module's tensors after .to(torch.float64)")
    reference = pytorch_attention({k: v.double() for k, v in weights.items()}, x.double())
    expect.close(result["output"], reference, what="SelfAttention(4, 3) in float64 on a float64 (2, 3, 4) batch")


def test_does_not_modify_its_input(student):
    x = randn(2, 4, 3, seed=60)
    with batched_input("SelfAttention(3, 2) on a (2, 4, 3) batch"):
        result = forward_output(student, make_weights(3, 2, seed=61), x)
    expect.that(result["input_unchanged"], what="the input tensor after forward(x)",
                expected="unchanged", actual="modified in place")


def test_uses_no_builtin_attention(student):
    structure(student, 3, 2)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="compute scores, weights and outputs yourself")
