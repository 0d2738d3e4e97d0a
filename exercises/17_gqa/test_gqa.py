"""Public tests for exercise 17. Run: pytest exercises/17_gqa

The oracles: PyTorch's own grouped-query attention,
F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True) (not
allowed in your code; it pairs query head m with key/value head
m // n_rep, as repeat_interleave does), with your module's weights; the
shipped MultiHeadAttention of exercise 06; the numbers printed in the
README; and properties (the cached steps equal your own forward of all
tokens, the cache holds num_kv_heads heads).
"""
import pytest
import torch
import torch.nn.functional as F

from coursekit import expect
from coursekit.probes import gqa as probes
from coursekit.probes import multihead

GQA = "GroupedQueryAttention"
F64 = {"atol": 1e-10, "rtol": 1e-9}


def config(d_in, d_out, context_length, num_heads, num_kv_heads, dropout=0.0, qkv_bias=False) -> dict:
    return {"d_in": d_in, "d_out": d_out, "context_length": context_length, "dropout": dropout,
            "num_heads": num_heads, "num_kv_heads": num_kv_heads, "qkv_bias": qkv_bias}


def randn(*shape, seed=0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ------------------------------------------------------------------ oracles


def builtin_gqa(x, weights, cfg, *, tiled=False, scale=None) -> torch.Tensor:
    """PyTorch's GQA with ``weights``: F.scaled_dot_product_attention with
    enable_gqa=True (key/value head j serves query heads j*n_rep ..
    (j+1)*n_rep - 1). ``tiled`` and ``scale`` reproduce two known mistakes
    (query head m with key/value head m % g; another scale), to name them."""
    h, g = cfg["num_heads"], cfg["num_kv_heads"]
    q, k, v = (F.linear(x, weights[f"{n}.weight"], weights.get(f"{n}.bias")) for n in ("W_query", "W_key", "W_value"))
    q, k, v = (t.unflatten(-1, (heads, -1)).transpose(1, 2) for t, heads in ((q, h), (k, g), (v, g)))
    if tiled:
        k, v = k.repeat(1, h // g, 1, 1), v.repeat(1, h // g, 1, 1)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=not tiled)
    return F.linear(heads.transpose(1, 2).flatten(2), weights["out_proj.weight"], weights["out_proj.bias"])


def value_mistakes(output, x, weights, cfg):
    """The pitfalls whose known wrong result equals ``output``."""
    def diagnose():
        if type(output) is not torch.Tensor or output.shape != (x.size(0), x.size(1), cfg["d_out"]):
            return
        head_dim = cfg["d_out"] // cfg["num_heads"]
        if torch.allclose(output, builtin_gqa(x, weights, cfg, tiled=True), **F64):
            yield "kv-repeat-tiled"
        if torch.allclose(output, builtin_gqa(x, weights, cfg, scale=(cfg["num_kv_heads"] * head_dim) ** -0.5), **F64):
            yield "scale-by-kv-width"
    return diagnose


def forward(student, cfg, x, weights) -> torch.Tensor:
    """Your module's output (float64, eval), naming the mistake when loading
    the weights by name fails (K and V as wide as Q)."""
    with expect.no_error(what=f"{GQA}(**{cfg}) loading weights W_key/W_value of {tuple(weights['W_key.weight'].shape)}",
                         pitfalls=["kv-proj-full-width"], match="size mismatch"):
        result = multihead.forward_in(student, GQA, cfg, x, weights, torch.float64)
    expect.that(result["input_unchanged"], what="the input after the forward pass", expected="unchanged",
                actual="modified in place")
    return result["output"]


# ------------------------------------------------------------------ repeat_kv

EXAMPLE = torch.tensor([[[[1.0, 2.0]], [[3.0, 4.0]]]])            # (b=1, g=2, n=1, hd=2)
EXAMPLE_REPEATED = torch.tensor([[[[1.0, 2.0]], [[1.0, 2.0]],     # heads 0, 1: key/value head 0
                                  [[3.0, 4.0]], [[3.0, 4.0]]]])   # heads 2, 3: key/value head 1


def test_repeat_kv_worked_example(student):
    result = probes.repeat_kv_output(student, EXAMPLE, 2)
    expect.close(result["output"], EXAMPLE_REPEATED, what="repeat_kv of the README's example, n_rep=2",
                 pitfalls=["kv-repeat-tiled"])


@pytest.mark.parametrize("b,g,n,hd,n_rep", [(2, 3, 4, 2, 2), (1, 2, 3, 4, 3), (2, 1, 5, 3, 4), (3, 2, 2, 2, 1)])
def test_repeat_kv_gives_each_query_head_its_group(student, b, g, n, hd, n_rep):
    x = randn(b, g, n, hd, seed=1)
    result = probes.repeat_kv_output(student, x, n_rep)
    what = f"repeat_kv of a {(b, g, n, hd)} tensor, n_rep={n_rep}"
    expect.shape(result["output"], (b, g * n_rep, n, hd), what=what)
    for m in range(g * n_rep):   # query head m reads key/value head m // n_rep
        expect.close(result["output"][:, m], x[:, m // n_rep], atol=0, rtol=0, pitfalls=["kv-repeat-tiled"],
                     what=f"{what}: head {m} (must be a copy of head {m} // {n_rep} = {m // n_rep})")
    expect.that(result["input_unchanged"], what="the input of repeat_kv after the call", expected="unchanged",
                actual="modified in place")


# ------------------------------------------------------------------ the bytes


def test_cache_bytes_per_token_worked_example(student):
    # The README's numbers: 80 layers, head_dim 128, float16 (LLaMA-2-70B's shape).
    result = probes.bytes_per_token(student, [
        {"num_layers": 80, "num_kv_heads": 8, "head_dim": 128},
        {"num_layers": 80, "num_kv_heads": 64, "head_dim": 128, "dtype": "float16"},
        {"num_layers": 80, "num_kv_heads": 1, "head_dim": 128, "dtype": "float16"},
        {"num_layers": 2, "num_kv_heads": 2, "head_dim": 4, "dtype": "float32"},
    ])
    expect.equal(result["bytes"], [327_680, 2_621_440, 40_960, 128],
                 what="cache_bytes_per_token for the README's configs (GQA 8, MHA 64, MQA 1 key/value heads; "
                      "a small float32 one)")


# ------------------------------------------------------------------ the module


def test_registers_narrow_key_and_value_projections(student):
    found = multihead.state(student, GQA, config(5, 12, 6, num_heads=4, num_kv_heads=2))
    expect.equal(found["parameters"], {"W_query.weight": [12, 5], "W_key.weight": [6, 5], "W_value.weight": [6, 5],
                                       "out_proj.weight": [12, 12], "out_proj.bias": [12]},
                 what="parameters of GroupedQueryAttention(5, 12, 6, 0.0, num_heads=4, num_kv_heads=2): "
                      "W_key and W_value give num_kv_heads * head_dim = 2 * 3 features",
                 pitfalls=["kv-proj-full-width"])
    expect.equal(found["buffers"].get("mask", {}).get("shape"), [6, 6], what="the causal mask buffer's shape")


@pytest.mark.parametrize("num_heads,num_kv_heads,bias", [(4, 2, False), (6, 3, True), (4, 1, False), (6, 2, True),
                                                         (3, 3, False)],
                         ids=["gqa-4-2", "gqa-6-3-bias", "mqa-4-1", "gqa-6-2-bias", "mha-3-3"])
def test_equals_pytorchs_grouped_query_attention(student, num_heads, num_kv_heads, bias):
    cfg = config(5, num_heads * 2, 6, num_heads, num_kv_heads, qkv_bias=bias)
    x, weights = randn(2, 6, 5, seed=2), probes.random_weights(cfg, seed=3, dtype=torch.float64)
    output = forward(student, cfg, x, weights)
    expect.close(output, builtin_gqa(x, weights, cfg), **F64, diagnose=value_mistakes(output, x, weights, cfg),
                 what=f"{GQA}(5, {cfg['d_out']}, 6, 0.0, num_heads={num_heads}, num_kv_heads={num_kv_heads}, "
                      f"qkv_bias={bias}) vs F.scaled_dot_product_attention(enable_gqa=True), same weights")


def test_shorter_inputs_are_causal(student):
    cfg = config(4, 8, 7, 4, 2)
    x, weights = randn(3, 4, 4, seed=4), probes.random_weights(cfg, seed=5, dtype=torch.float64)
    output = forward(student, cfg, x, weights)
    expect.close(output, builtin_gqa(x, weights, cfg), **F64, diagnose=value_mistakes(output, x, weights, cfg),
                 what="4 tokens through a GroupedQueryAttention of context_length=7 vs the causal built-in")


@pytest.mark.parametrize("num_heads,num_kv_heads", [(3, 3), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
def test_equals_multihead_attention_with_copied_weights(student, num_heads, num_kv_heads):
    cfg = config(5, num_heads * 2, 4, num_heads, num_kv_heads)
    result = probes.against_multihead(student, cfg, 6, randn(2, 4, 5, seed=6))
    copied = "the same weights" if num_heads == num_kv_heads else "each key/value head's rows copied for its query heads"
    expect.close(result["output"], result["multihead"], **F64, pitfalls=["kv-repeat-tiled"],
                 what=f"GroupedQueryAttention(num_heads={num_heads}, num_kv_heads={num_kv_heads}) vs exercise 06's "
                      f"MultiHeadAttention with {copied}")


@pytest.mark.parametrize("d_out,num_heads,num_kv_heads", [(12, 4, 3), (12, 6, 4), (10, 4, 2)])
def test_rejects_head_counts_that_do_not_divide(student, d_out, num_heads, num_kv_heads):
    result = multihead.exception_from(student, GQA, [], config(4, d_out, 5, num_heads, num_kv_heads))
    expect.equal(result["raised"], "ValueError", pitfalls=["kv-heads-not-divisible"] if d_out % num_heads == 0 else [],
                 what=f"GroupedQueryAttention(4, {d_out}, 5, 0.0, num_heads={num_heads}, num_kv_heads={num_kv_heads})")


def test_dropout_only_in_training_mode(student):
    cfg = config(4, 8, 5, 4, 2, dropout=0.5)
    outputs = multihead.train_eval(student, GQA, cfg, randn(2, 5, 4, seed=7).float())
    expect.close(outputs["eval_1"], outputs["eval_0"], what="eval mode (dropout=0.5), two random seeds")
    expect.that(not torch.allclose(outputs["train_0"], outputs["train_1"]), what="train mode (dropout=0.5), two seeds",
                expected="different outputs (dropout on the attention weights)", actual="identical outputs")


# ------------------------------------------------------------------ the cache


def cached(student, cfg, seed, xs, chunks) -> dict:
    with expect.no_error(what=f"forward_cached in chunks {chunks} (the keys and values grow along the tokens, dim 2)",
                         pitfalls=["cache-cat-heads-dim"], match="Sizes of tensors must match|size of tensor a"):
        return probes.cached_steps(student, cfg, seed, xs, chunks)


@pytest.mark.parametrize("num_heads,num_kv_heads,chunks", [(4, 2, [3, 1, 1, 1]), (6, 3, [1, 1, 1, 1, 1, 1]),
                                                           (4, 1, [2, 3, 1]), (2, 2, [4, 2])],
                         ids=["gqa-steps", "gqa-from-one", "mqa-chunks", "mha"])
def test_cached_steps_equal_the_recomputation(student, num_heads, num_kv_heads, chunks):
    cfg = config(5, num_heads * 2, 6, num_heads, num_kv_heads)
    xs, weights = [randn(1, 6, 5, seed=8), randn(2, 6, 5, seed=9)], probes.random_weights(cfg, 10, dtype=torch.float64)
    result = cached(student, cfg, 10, xs, chunks)
    for i, x in enumerate(xs):
        what = f"sequence {i}: forward_cached in chunks {chunks}, each step given only the returned keys and values"
        diagnose = value_mistakes(result["outputs"][i], x, weights, cfg)
        expect.close(result["outputs"][i][:, :chunks[0]], builtin_gqa(x[:, :chunks[0]], weights, cfg), **F64,
                     what=what + ": the prefill vs the built-in", diagnose=diagnose)
        expect.close(result["outputs"][i], result["full"][i], **F64, pitfalls=["cache-mask-rows"],
                     what=what + ": every step vs your own forward of all 6 tokens")
        expect.close(result["outputs"][i], builtin_gqa(x, weights, cfg), **F64, what=what + " vs the built-in")
    expect.that(result["inputs_unchanged"], what="x and the keys and values handed to forward_cached",
                expected="unchanged", actual="modified in place")


@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 2), (6, 3), (4, 1), (3, 3)])
def test_the_cache_stores_the_key_value_heads_only(student, num_heads, num_kv_heads):
    head_dim = 2
    cfg = config(5, num_heads * head_dim, 4, num_heads, num_kv_heads)
    result = cached(student, cfg, 11, [randn(2, 4, 5, seed=11), randn(1, 4, 5, seed=12)], [2, 1, 1])
    keys, values = result["caches"][0][-1]
    expect.shape(keys, (2, num_kv_heads, 4, head_dim), pitfalls=["kv-cache-repeated-heads", "kv-proj-full-width"],
                 what=f"the keys forward_cached returns after 4 tokens (num_heads={num_heads}, "
                      f"num_kv_heads={num_kv_heads}): (b, num_kv_heads, t, head_dim)")
    expect.shape(values, (2, num_kv_heads, 4, head_dim), what="the values, likewise",
                 pitfalls=["kv-cache-repeated-heads", "kv-proj-full-width"])
    measured = probes.measured_bytes_per_token([keys, values])
    multihead_bytes = 2 * num_heads * head_dim * 8   # float64, every query head's key and value
    expect.equal(measured, multihead_bytes * num_kv_heads / num_heads, pitfalls=["kv-cache-repeated-heads"],
                 what=f"bytes per token of one sequence in the returned cache (float64): multi-head attention's "
                      f"{multihead_bytes} divided by num_heads / num_kv_heads = {num_heads // num_kv_heads}")


def test_the_cache_stops_at_the_context_length(student):
    result = probes.cached_too_long(student, config(5, 8, 4, 4, 2), 13, randn(2, 6, 5, seed=13), 3)
    expect.equal(result["type"], "ValueError", what="forward_cached of 3 new tokens after 3 cached "
                                                    "(context_length=4): the exception raised")


def test_runs_on_the_inputs_device(student):
    # PyTorch's meta device stands in for a GPU: a mask made without
    # device= lands on the CPU and meets the inputs' device.
    result = probes.cached_placement(student, config(5, 8, 6, 4, 2), randn(2, 5, 5, seed=14).float(), 3)
    expect.equal(result["placement"], "ok",
                 what="the module and x on the meta device, a prefill of 3 tokens and a step of 2 through "
                      f"forward_cached: every tensor made on x's device {result['detail']}".rstrip())


def test_uses_no_builtin_attention(student):
    probes.repeat_kv_output(student, EXAMPLE, 2)   # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write the attention yourself (repeat_kv, scores, softmax)")
