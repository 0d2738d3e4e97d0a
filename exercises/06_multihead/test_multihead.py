"""Public tests for exercise 06. Run: pytest exercises/06_multihead"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coursekit import expect
from coursekit.probes import multihead as probe

MHA, WRAPPER = "MultiHeadAttention", "MultiHeadAttentionWrapper"


def config(d_in, d_out, context_length, num_heads, dropout=0.0, qkv_bias=False) -> dict:
    return {"d_in": d_in, "d_out": d_out, "context_length": context_length, "dropout": dropout,
            "num_heads": num_heads, "qkv_bias": qkv_bias}


def randn(*shape, seed=0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def causal(n: int) -> torch.Tensor:
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


# ------------------------------------------------------------------ oracles
# nn.MultiheadAttention and F.scaled_dot_product_attention with the same
# weights. Careful: scaled_dot_product_attention's boolean mask means True =
# ALLOWED, the opposite of this course; is_causal=True avoids the question.


def torch_multihead(x: torch.Tensor, weights: dict, num_heads: int) -> torch.Tensor:
    """nn.MultiheadAttention (d_in == d_out) with ``weights`` copied in,
    causal mask, eval mode; differentiable with respect to ``x``."""
    d = x.size(-1)
    oracle = nn.MultiheadAttention(d, num_heads, bias=True, batch_first=True).eval()
    biases = [weights.get(f"{name}.bias", torch.zeros(d)) for name in probe.PROJECTIONS]
    with torch.no_grad():
        oracle.in_proj_weight.copy_(torch.cat([weights[f"{name}.weight"] for name in probe.PROJECTIONS]))
        oracle.in_proj_bias.copy_(torch.cat(biases))
        oracle.out_proj.weight.copy_(weights["out_proj.weight"])
        oracle.out_proj.bias.copy_(weights["out_proj.bias"])
    output, _ = oracle(x, x, x, attn_mask=causal(x.size(1)), need_weights=False)
    return output


def causal_heads(q, k, v, scale=None, softmax_dim=None):
    """Causal attention of (b, h, n, hd) heads; with ``softmax_dim``, the
    softmax over that dimension of the (b, h, n, n) scores instead of the keys'."""
    if softmax_dim is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    scores = q @ k.transpose(-2, -1) * (scale or q.size(-1) ** -0.5)
    return torch.softmax(scores.masked_fill(causal(q.size(-2)), float("-inf")), dim=softmax_dim) @ v


def per_head(x, weights, num_heads, *, prefix="", scale=None, split=None, merge=None, out_proj=True, softmax_dim=None):
    """Causal attention head by head with F.scaled_dot_product_attention.
    The keyword arguments reproduce known mistakes, to name them."""
    q, k, v = (F.linear(x, weights[f"{prefix}{n}.weight"], weights.get(f"{prefix}{n}.bias")) for n in probe.PROJECTIONS)
    split = split or (lambda t: torch.stack(t.chunk(num_heads, dim=-1), dim=1))
    heads = causal_heads(split(q), split(k), split(v), scale, softmax_dim)
    merged = merge(heads) if merge else torch.cat(heads.unbind(1), dim=-1)
    return F.linear(merged, weights["out_proj.weight"], weights["out_proj.bias"]) if out_proj else merged


def suspected(output, x, weights, num_heads) -> list[str]:
    """The pitfalls whose known wrong result equals ``output``."""
    b, n, d = output.shape if type(output) is torch.Tensor and output.dim() == 3 else (0, 0, 0)
    if d != weights["out_proj.weight"].size(0):
        return []
    hd = d // num_heads
    mistakes = {
        "scale-by-d": [per_head(x, weights, num_heads, scale=s) for s in (1 / hd, 1 / d ** 0.5, 1 / d)],
        "view-no-transpose": [per_head(x, weights, num_heads, split=lambda t: t.reshape(b, num_heads, n, hd))],
        "merge-wrong-order": [per_head(x, weights, num_heads, merge=lambda t: t.reshape(b, n, d))],
        "no-out-proj": [per_head(x, weights, num_heads, out_proj=False)],
        # A dim copied from 3-D scores: over the queries of (b, h, n_q, n_k).
        "softmax-wrong-dim": [per_head(x, weights, num_heads, softmax_dim=2)],
    }
    return [pid for pid, wrong in mistakes.items()
            if any(torch.allclose(output, w, atol=1e-5, rtol=1e-4) for w in wrong if w.shape == output.shape)]


def expect_attention(output, expected: torch.Tensor, x, weights, num_heads, what: str) -> None:
    """expect.close, naming the known mistake that reproduces ``output`` when it is wrong."""
    with torch.no_grad():
        right = type(output) is torch.Tensor and output.shape == expected.shape and torch.allclose(
            output, expected, atol=1e-5, rtol=1e-4)
        pitfalls = [] if right else suspected(output, x, weights, num_heads)
    expect.close(output, expected, what=what, pitfalls=pitfalls)


def expect_loaded(load: dict, what: str) -> None:
    names = load["missing"] + load["unexpected"]
    pitfalls = ["plain-list-layers"] if any(n.startswith("heads.") for n in load["unexpected"]) else []
    pitfalls += ["no-out-proj"] if any(n.startswith("out_proj.") for n in names) else []
    expect.equal(load, {"missing": [], "unexpected": []}, what=f"{what}: copying in weights under the names "
                 "of the contract (missing = your names we did not set, unexpected = ours you lack)",
                 pitfalls=pitfalls)


# ------------------------------------------------------------------ split_heads / merge_heads

SPLIT_EXAMPLE = torch.tensor([[[0.0, 1.0, 2.0, 3.0],
                               [4.0, 5.0, 6.0, 7.0]]])             # (b=1, n=2, d=4)
SPLIT_RESULT = torch.tensor([[[[0.0, 1.0], [4.0, 5.0]],             # head 0: features 0-1 of each token
                              [[2.0, 3.0], [6.0, 7.0]]]])           # head 1: features 2-3 of each token


def test_split_heads_worked_example(student):
    result = probe.split_heads_output(student, SPLIT_EXAMPLE, 2)
    expect.close(result["output"], SPLIT_RESULT, what="split_heads of the README's example, 2 heads",
                 pitfalls=["view-no-transpose"])


@pytest.mark.parametrize("b,n,d,h", [(2, 3, 8, 4), (3, 5, 6, 2), (1, 4, 6, 6), (2, 3, 6, 1)])
def test_split_heads_gives_each_head_its_features(student, b, n, d, h):
    x = randn(b, n, d, seed=1)
    result = probe.split_heads_output(student, x, h)
    expected = torch.stack(x.chunk(h, dim=-1), dim=1)  # head i: x[:, :, i*hd:(i+1)*hd]
    expect.shape(result["output"], (b, h, n, d // h), what=f"split_heads of a {(b, n, d)} input, {h} heads")
    expect.close(result["output"], expected, what=f"split_heads of a {(b, n, d)} input, {h} heads",
                 pitfalls=["view-no-transpose"])
    expect.that(result["input_unchanged"], what="the input of split_heads after the call",
                expected="unchanged", actual="modified in place")


def test_split_heads_rejects_indivisible_features(student):
    result = probe.exception_from(student, "split_heads", [randn(2, 3, 7), 2])
    expect.equal(result["raised"], "ValueError", what="split_heads of a (2, 3, 7) input into 2 heads (7 % 2 != 0)")


def test_merge_heads_worked_example(student):
    result = probe.merge_heads_output(student, SPLIT_RESULT)
    expect.close(result["output"], SPLIT_EXAMPLE, what="merge_heads of the README's example (2 heads)",
                 pitfalls=["merge-wrong-order"])


@pytest.mark.parametrize("b,h,n,hd", [(2, 4, 3, 2), (3, 2, 5, 3), (1, 3, 1, 4)])
def test_merge_heads_puts_each_tokens_heads_side_by_side(student, b, h, n, hd):
    y = randn(b, h, n, hd, seed=2)  # contiguous, as attention outputs are
    result = probe.merge_heads_output(student, y)
    expect.close(result["output"], torch.cat(y.unbind(1), dim=-1),
                 what=f"merge_heads of a contiguous {(b, h, n, hd)} input", pitfalls=["merge-wrong-order"])
    expect.that(result["input_unchanged"], what="the input of merge_heads after the call",
                expected="unchanged", actual="modified in place")


def test_merge_heads_undoes_split_heads(student):
    x, y = randn(2, 3, 8, seed=3), randn(3, 4, 2, 5, seed=4)
    result = probe.round_trips(student, x, y)
    # Which half is wrong, if the round trip fails: each one on its own.
    split_ok = torch.allclose(probe.split_heads_output(student, x, 4)["output"], torch.stack(x.chunk(4, -1), 1))
    merge_ok = torch.allclose(probe.merge_heads_output(student, y)["output"], torch.cat(y.unbind(1), -1))
    pitfalls = [pid for pid, ok in (("view-no-transpose", split_ok), ("merge-wrong-order", merge_ok)) if not ok]
    expect.close(result["merge_of_split"], x, what="merge_heads(split_heads(x, 4)) for x of shape (2, 3, 8)",
                 pitfalls=pitfalls)
    expect.close(result["split_of_merge"], y, what="split_heads(merge_heads(y), 4) for y of shape (3, 4, 2, 5)",
                 pitfalls=pitfalls)


# ------------------------------------------------------------------ MultiHeadAttentionWrapper


def test_wrapper_registers_its_heads(student):
    cfg = config(d_in=3, d_out=2, context_length=6, num_heads=3)
    found = probe.structure(student, WRAPPER, cfg)
    expect.modules_registered(found["hidden_lists"], what="the heads of MultiHeadAttentionWrapper")
    types = {name: t for name, t in found["module_types"].items() if name.count(".") <= 1}
    expected = {"heads": "ModuleList", **{f"heads.{i}": "CausalAttention" for i in range(3)}}
    expect.equal({k: v for k, v in types.items() if k.startswith("heads")}, expected,
                 what="sub-modules of MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)",
                 pitfalls=["plain-list-layers"])
    expect.equal(found["n_parameters"], 3 * 3 * (3 * 2), what="number of parameters (3 heads x 3 projections 3->2)",
                 pitfalls=["plain-list-layers"])


@pytest.mark.parametrize("b,n,ctx,d_in,d_out,h,bias", [(2, 6, 6, 3, 2, 2, False), (3, 4, 7, 5, 3, 4, True)])
def test_wrapper_concatenates_causal_heads(student, b, n, ctx, d_in, d_out, h, bias):
    cfg = config(d_in, d_out, ctx, h, qkv_bias=bias)
    x, weights = randn(b, n, d_in, seed=5), probe.random_weights(WRAPPER, cfg, seed=6)
    result = probe.forward(student, WRAPPER, cfg, x, weights)
    what = f"MultiHeadAttentionWrapper({d_in}, {d_out}, {ctx}, 0.0, num_heads={h}) on a {(b, n, d_in)} input"
    expect.shape(result["output"], (b, n, h * d_out), what=what, pitfalls=["cat-wrong-dim"])
    expect_loaded(result["load"], what)
    heads = [per_head(x, weights, 1, prefix=f"heads.{i}.", out_proj=False) for i in range(h)]
    expect.close(result["output"], torch.cat(heads, dim=-1), what=what + " (head i = features i*d_out...)",
                 pitfalls=["cat-wrong-dim"])


def test_wrapper_eval_switches_off_dropout_in_every_head(student):
    cfg = config(d_in=4, d_out=3, context_length=5, num_heads=2, dropout=0.5)
    outputs = probe.train_eval(student, WRAPPER, cfg, randn(2, 5, 4, seed=7))
    expect.close(outputs["eval_1"], outputs["eval_0"], what="wrapper in eval mode (dropout=0.5), two random seeds",
                 pitfalls=["plain-list-layers"])
    expect.that(not torch.allclose(outputs["train_0"], outputs["train_1"]),
                what="wrapper in train mode (dropout=0.5), two random seeds",
                expected="different outputs (dropout in every head)", actual="identical outputs")


# ------------------------------------------------------------------ MultiHeadAttention: structure


def test_mha_rejects_d_out_not_divisible_by_num_heads(student):
    result = probe.exception_from(student, MHA, [], config(d_in=4, d_out=6, context_length=5, num_heads=4))
    expect.equal(result["raised"], "ValueError", what="MultiHeadAttention(4, 6, 5, 0.0, num_heads=4) (6 % 4 != 0)")


@pytest.mark.parametrize("bias", [False, True])
def test_mha_registers_projections_and_mask(student, bias):
    found = probe.structure(student, MHA, config(d_in=4, d_out=6, context_length=5, num_heads=3, qkv_bias=bias))
    params = {f"{n}.{kind}": [6, 4] if kind == "weight" else [6] for n in probe.PROJECTIONS
              for kind in (("weight", "bias") if bias else ("weight",))}
    params.update({"out_proj.weight": [6, 6], "out_proj.bias": [6]})
    expect.equal(found["parameters"], params, what=f"parameters of MultiHeadAttention(4, 6, 5, 0.0, 3, qkv_bias={bias})",
                 pitfalls=["no-out-proj"] if "out_proj.weight" not in found["parameters"] else [])
    expect.equal({n: found["module_types"].get(n) for n in ("dropout", "out_proj")},
                 {"dropout": "Dropout", "out_proj": "Linear"}, what="the dropout and out_proj sub-modules")
    expect.equal(found["buffers"], {"mask": {"shape": [5, 5], "dtype": "torch.bool", "persistent": True}},
                 what="registered buffers (context_length=5)",
                 pitfalls=["mask-not-buffer"] if "mask" in found["tensor_attributes"] else [])
    expect.close(found["buffer_values"]["mask"], causal(5), what="the mask buffer: True above the diagonal")


def test_mha_to_float64_moves_everything(student):
    cfg = config(d_in=4, d_out=6, context_length=5, num_heads=2)
    result = probe.after_to_float64(student, MHA, cfg, randn(2, 5, 4, seed=8))
    wrong = {name: dtype for name, dtype in result["dtypes"].items()
             if dtype != ("torch.bool" if name == "mask" else "torch.float64")}
    expect.that(not wrong, what="dtypes after .to(torch.float64)", expected="float64 parameters, a bool mask",
                actual=f"{wrong}", pitfalls=["mask-not-buffer"])
    expect.equal(result["output_dtype"], "torch.float64", what="output dtype for a float64 input after .to(float64)")


# ------------------------------------------------------------------ MultiHeadAttention: values

MHA_CASES = [  # b, n, context_length, d, num_heads, qkv_bias
    (2, 5, 5, 6, 3, False),
    (3, 4, 6, 8, 2, True),
    (1, 7, 7, 12, 4, True),
]


@pytest.mark.parametrize("b,n,ctx,d,h,bias", MHA_CASES)
def test_mha_matches_torch_multihead_attention(student, b, n, ctx, d, h, bias):
    cfg = config(d, d, ctx, h, qkv_bias=bias)
    x, weights = randn(b, n, d, seed=9), probe.random_weights(MHA, cfg, seed=10)
    result = probe.forward(student, MHA, cfg, x, weights)
    what = f"MultiHeadAttention({d}, {d}, {ctx}, 0.0, num_heads={h}, qkv_bias={bias}) on a {(b, n, d)} input"
    expect_loaded(result["load"], what)
    expect.shape(result["output"], (b, n, d), what=what)
    with torch.no_grad():
        expected = torch_multihead(x, weights, h)
    expect_attention(result["output"], expected, x, weights, h, what + ", compared with nn.MultiheadAttention")


def test_mha_with_d_in_different_from_d_out(student):
    cfg = config(d_in=5, d_out=6, context_length=4, num_heads=2, qkv_bias=True)
    x, weights = randn(3, 4, 5, seed=11), probe.random_weights(MHA, cfg, seed=12)
    result = probe.forward(student, MHA, cfg, x, weights)
    what = "MultiHeadAttention(5, 6, 4, 0.0, num_heads=2, qkv_bias=True) on a (3, 4, 5) input"
    expect_loaded(result["load"], what)
    expect.shape(result["output"], (3, 4, 6), what=what)
    with torch.no_grad():
        expected = per_head(x, weights, 2)
    expect_attention(result["output"], expected, x, weights, 2, what + ", compared with attention head by head")


def test_mha_weights_of_each_query_sum_to_one(student):
    # Every value vector is (3, 3, ..., 3) and out_proj is the identity, so
    # each output feature is 3 * (sum of the query's weights) in every head.
    cfg = config(d_in=4, d_out=6, context_length=5, num_heads=3, qkv_bias=True)
    weights = probe.random_weights(MHA, cfg, seed=13)
    weights.update({"W_value.weight": torch.zeros(6, 4), "W_value.bias": torch.full((6,), 3.0),
                    "out_proj.weight": torch.eye(6), "out_proj.bias": torch.zeros(6)})
    result = probe.forward(student, MHA, cfg, randn(2, 5, 4, seed=14), weights)
    expect_loaded(result["load"], "MultiHeadAttention(4, 6, 5, 0.0, 3, qkv_bias=True)")
    expect.close(result["output"], torch.full((2, 5, 6), 3.0),
                 what="output when every value vector is 3 and out_proj is the identity (= 3 x each query's weight sum)",
                 pitfalls=["softmax-wrong-dim"])


def test_mha_one_head_matches_torch(student):
    cfg = config(d_in=4, d_out=4, context_length=6, num_heads=1)
    x, weights = randn(2, 6, 4, seed=15), probe.random_weights(MHA, cfg, seed=16)
    result = probe.forward(student, MHA, cfg, x, weights)
    what = "MultiHeadAttention(4, 4, 6, 0.0, num_heads=1) on a (2, 6, 4) input, compared with nn.MultiheadAttention"
    expect_loaded(result["load"], what)
    with torch.no_grad():
        expected = torch_multihead(x, weights, 1)
    expect_attention(result["output"], expected, x, weights, 1, what)


def test_mha_gradients_match_torch_and_reach_every_parameter(student):
    cfg = config(d_in=6, d_out=6, context_length=5, num_heads=2, qkv_bias=True)
    x, weights, upstream = randn(2, 5, 6, seed=17), probe.random_weights(MHA, cfg, seed=18), randn(2, 5, 6, seed=19)
    result = probe.gradients(student, MHA, cfg, x, weights, upstream)
    missing = [name for name, got in result["reach"].items() if not got]
    expect.gradients_reach_all(result["reach"], what="gradients of MultiHeadAttention's parameters",
                               pitfalls=["no-out-proj"] if any(n.startswith("out_proj") for n in missing) else [])
    x_ref = x.clone().requires_grad_(True)
    (torch_multihead(x_ref, weights, 2) * upstream).sum().backward()
    expect.close(result["input_grad"], x_ref.grad, what="gradient with respect to the input, vs nn.MultiheadAttention "
                 "(if the tests of the outputs fail too, fix those first)")


def test_mha_dropout_only_in_training(student):
    cfg = config(d_in=6, d_out=6, context_length=5, num_heads=2, dropout=0.5)
    x, weights = randn(2, 5, 6, seed=20), probe.random_weights(MHA, cfg, seed=21)
    outputs = probe.train_eval(student, MHA, cfg, x, weights)
    expect.that(not torch.allclose(outputs["train_0"], outputs["train_1"]),
                what="train mode (dropout=0.5), two random seeds", expected="different outputs",
                actual="identical outputs: dropout is never applied", pitfalls=["dropout-typo"])
    expect.close(outputs["eval_1"], outputs["eval_0"], what="eval mode (dropout=0.5), two random seeds",
                 pitfalls=["dropout-in-eval"])
    # Your own module without dropout: eval mode must be exactly that.
    no_dropout = probe.forward(student, MHA, {**cfg, "dropout": 0.0}, x, weights)["output"]
    expect.close(outputs["eval_0"], no_dropout, what="eval mode with dropout=0.5 vs the same weights with dropout=0.0",
                 pitfalls=["dropout-in-eval"])


# ------------------------------------------------------------------ MultiHeadAttention: lengths and state


def test_mha_accepts_inputs_shorter_than_context_length(student):
    cfg = config(d_in=6, d_out=6, context_length=8, num_heads=3)
    weights = probe.random_weights(MHA, cfg, seed=22)
    for n in (8, 3, 1):  # the full length first: if that is right, a shorter one can only miss the slice
        x = randn(2, n, 6, seed=23)
        result = probe.forward(student, MHA, cfg, x, weights)
        with torch.no_grad():
            expected = torch_multihead(x, weights, 3)
        expect.close(result["output"], expected, what=f"context_length=8, an input of {n} tokens",
                     pitfalls=["mask-no-slice"] if n < 8 else [])


def test_mha_rejects_inputs_longer_than_context_length(student):
    result = probe.forward_exception(student, MHA, config(d_in=4, d_out=4, context_length=5, num_heads=2),
                                     randn(1, 6, 4))
    expect.equal(result["raised"], "ValueError", what="context_length=5, an input of 6 tokens")


def test_mha_leaves_its_mask_alone(student):
    cfg = config(d_in=4, d_out=6, context_length=5, num_heads=2)
    lengths = [5, 3, 5, 2]
    inputs = [randn(2, n, 4, seed=24 + n) for n in lengths]
    result = probe.calls_in_sequence(student, MHA, cfg, inputs, probe.random_weights(MHA, cfg, seed=25))
    for i, call in enumerate(result["calls"]):
        expect.that(call["buffers_unchanged"], what=f"the registered mask after call {i + 1} (inputs of {lengths} tokens)",
                    expected="unchanged", actual="changed (shape or values)", pitfalls=["mask-inplace-buffer"])
    for i, (call, fresh) in enumerate(zip(result["calls"], result["fresh"])):
        what = f"call {i + 1} of one module on inputs of {lengths} tokens"
        expect.that(call["error"] is None, what=what, expected="an output", actual=f"{call['error']}")
        expect.close(call["output"], fresh, what=what + ", vs a fresh module", pitfalls=["mask-inplace-buffer"])


def test_uses_no_builtin_attention(student):
    probe.split_heads_output(student, SPLIT_EXAMPLE, 2)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write it with matmul and softmax")
