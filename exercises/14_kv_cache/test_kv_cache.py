"""Public tests for exercise 14. Run: pytest exercises/14_kv_cache

The oracle is the shipped GPT itself, recomputed from scratch: at every
step the cached logits must equal model(all tokens so far), in float64 to
1e-9; cached greedy decoding must give the tokens of decoding without a
cache; a padded batch must give each prompt what it gets alone.
"""
import pytest
import torch

from coursekit import expect
from coursekit.probes import kv_cache as probes

MODEL = {"vocab_size": 11, "context_length": 8, "d_model": 12, "num_heads": 3, "num_layers": 2}
F64 = {"atol": 1e-9, "rtol": 1e-7}
PAD = MODEL["vocab_size"] - 1  # never a prompt token here


def tokens(seed: int, *shape: int, high: int = PAD) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def step_mistakes(student, config: dict, seed: int, idx: torch.Tensor, chunks: list[int]):
    """Which mistake of the cached steps a wrong result comes from."""
    def diagnose():
        seen = probes.positions_seen(student, config, seed, idx, chunks)
        starts = [sum(chunks[:i]) for i in range(len(chunks))]
        expected = [[list(range(s, s + size))] * idx.size(0) for s, size in zip(starts, chunks)]
        if seen != expected and all(row is not None for row in seen):
            yield "cache-position-offset"
        if chunks[0] > 1 and not probes.sees_the_cache(student, config, seed, idx, chunks[0]):
            yield "cache-mask-rows"
        if any(size > 1 for size in chunks[1:]) and not probes.chunk_is_causal(
                student, config, seed, idx[:, :sum(chunks[:2])], chunks[0]):
            yield "cache-chunk-unmasked"
    return diagnose


# --- KVCache --------------------------------------------------------------------

def test_cache_counts_and_returns_everything_so_far(student):
    result = probes.cache_api(student, MODEL, 1, [3, 1, 1])
    expect.equal(result["lengths"], [0, 3, 4, 5], what="len(cache): new, then after appending 3, 1 and 1 positions "
                                                       "to every layer")
    expect.that(result["concatenated"], what="what cache.append(layer, k, v) returns",
                expected="all of that layer's keys and values so far, in order (b, h, t + n, head_dim)",
                actual="something else")


def test_cache_never_grows_past_the_context(student):
    result = probes.context_limit(student, MODEL, 2, tokens(2, 2, MODEL["context_length"] + 1))
    expect.equal(result["append"]["type"], "ValueError", what="cache.append to a cache holding context_length=8 positions: "
                                                       "the exception raised", pitfalls=["cache-past-context"])
    expect.equal(result["forward"]["type"], "ValueError", what="forward_cached of a 9th token after 8 cached: the exception "
                                                        "raised", pitfalls=["cache-past-context"])
    expect.equal(result["length"], MODEL["context_length"], what="len(cache) after that refused forward_cached")


# --- forward_cached -----------------------------------------------------------------

def test_prefill_equals_the_full_forward(student):
    idx = tokens(3, 2, 6)
    result = probes.steps(student, MODEL, 3, idx, [6])
    expected = probes.full_logits(probes.model(student, MODEL, 3), idx)
    expect.close(result["logits"], expected, **F64, what="forward_cached(model, idx of 6 tokens, empty cache) vs model(idx)",
                 diagnose=step_mistakes(student, MODEL, 3, idx, [6]))
    expect.equal(result["lengths"], [6], what="len(cache) after the prefill")


@pytest.mark.parametrize("prefill", [1, 3, 7])
def test_one_token_at_a_time_equals_the_full_recomputation(student, prefill):
    idx = tokens(4 + prefill, 2, MODEL["context_length"])
    chunks = [prefill] + [1] * (MODEL["context_length"] - prefill)
    result = probes.steps(student, MODEL, 4, idx, chunks)
    expected = probes.full_logits(probes.model(student, MODEL, 4), idx)
    diagnose = step_mistakes(student, MODEL, 4, idx, chunks)
    for t in range(prefill, MODEL["context_length"] + 1):
        expect.close(result["logits"][:, :t], expected[:, :t], **F64, diagnose=diagnose,
                     what=f"logits of the first {t} tokens (prefill {prefill}, then one token at a time) vs "
                          f"model(idx[:, :{t}])")
    expect.equal(result["lengths"], list(range(prefill, MODEL["context_length"] + 1)), what="len(cache) after each step")


def test_a_one_token_step_sees_every_cached_token(student):
    expect.that(probes.sees_the_cache(student, MODEL, 5, tokens(5, 2, 6), 5),
                what="the logits of token 5 (after 5 cached) when cached tokens 1..4 change",
                expected="changed (a new token attends to every cached one)", actual="unchanged",
                pitfalls=["cache-mask-rows"])


def test_a_chunk_after_the_cache_is_causal(student):
    expect.that(probes.chunk_is_causal(student, MODEL, 6, tokens(6, 2, 7), 3),
                what="after 3 cached tokens, a chunk of 4: the first one's logits when the chunk's last token changes",
                expected="unchanged (a token never sees the ones after it)", actual="changed",
                pitfalls=["cache-chunk-unmasked"])


def test_chunks_equal_the_full_recomputation(student):
    idx = tokens(7, 3, MODEL["context_length"])
    chunks = [2, 3, 1, 2]
    result = probes.steps(student, MODEL, 7, idx, chunks)
    expect.close(result["logits"], probes.full_logits(probes.model(student, MODEL, 7), idx), **F64,
                 what="forward_cached in chunks of 2, 3, 1, 2 tokens vs model(idx)",
                 diagnose=step_mistakes(student, MODEL, 7, idx, chunks))


def test_positions_continue_after_the_cache(student):
    seen = probes.positions_seen(student, MODEL, 8, tokens(8, 1, 6), [4, 1, 1])
    expect.equal(seen, [[[0, 1, 2, 3]], [[4]], [[5]]], what="positions looked up in pos_emb: a prefill of 4 tokens, "
                                                             "then one token twice", pitfalls=["cache-position-offset"])


# --- generation --------------------------------------------------------------------

@pytest.mark.parametrize("n,new", [(3, 4), (5, 9)], ids=["within-context", "past-context"])
def test_generate_cached_equals_decoding_without_a_cache(student, n, new):
    idx = tokens(9, 2, n)
    what = f"generate_cached(model(context_length=8), idx of {n} tokens, max_new_tokens={new})"
    try:
        result = probes.generation(student, MODEL, 9, idx, new)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - explained below
        expect.that(False, what=what, expected="no error", actual=f"{type(exc).__name__}: {exc}",
                    pitfalls=["cache-past-context"] if n + new > MODEL["context_length"] else [])
    expected = probes.recomputed_generation(probes.model(student, MODEL, 9), idx, new)
    within = MODEL["context_length"] + 1  # the tokens made before the cache is full

    def diagnose():  # right until the cache is full, wrong after
        if n + new > within and torch.equal(result["tokens"][:, :within], expected[:, :within]):
            yield "cache-past-context"

    expect.close(result["tokens"], expected, atol=0, rtol=0, what=what + " vs greedy decoding by model(idx[:, -8:])",
                 diagnose=diagnose)
    expect.that(result["inputs_unchanged"], what="idx after the call", expected="unchanged", actual="modified")


PROMPTS = [torch.tensor([3, 1, 4, 1, 5]), torch.tensor([9]), torch.tensor([2, 6, 5])]


def cache_works_without_padding(student) -> bool:
    """A prefill and single steps, no padding, give the full recomputation's logits."""
    idx = tokens(18, 2, MODEL["context_length"])
    chunks = [3] + [1] * (MODEL["context_length"] - 3)
    plain = probes.steps(student, MODEL, 18, idx, chunks)["logits"]
    return torch.allclose(plain, probes.full_logits(probes.model(student, MODEL, 18), idx), **F64)


def padding_mistakes(student):
    """Which padding mistake a wrong padded result comes from; none when the
    cache is wrong without padding already (other tests name that)."""
    def diagnose():
        if not cache_works_without_padding(student):
            return
        result = probes.padded(student, MODEL, 10, PROMPTS, PAD, tokens(10, 3, 1), tokens(11, 8))
        if not all(torch.isfinite(row).all() for row in result["rows"]):
            yield "softmax-all-masked-nan"
        elif not result["pad_invariant"]:
            yield "padding-attended"
        idx, pad_mask = probes.left_pad(PROMPTS, PAD)
        seen = probes.positions_seen(student, MODEL, 10, idx, [idx.size(1)], pad_mask)[0]
        if seen is not None and [row[-len(p):] for row, p in zip(seen, PROMPTS)] != [list(range(len(p))) for p in PROMPTS]:
            yield "padding-positions"
    return diagnose


def test_padded_prompts_get_their_own_logits(student):
    result = probes.padded(student, MODEL, 10, PROMPTS, PAD, tokens(10, 3, 1), tokens(11, 8))
    gpt = probes.model(student, MODEL, 10)
    for row, prompt in enumerate(PROMPTS):
        alone = probes.full_logits(gpt, torch.cat([prompt, tokens(10, 3, 1)[row]])[None])[0]
        expect.close(result["rows"][row], alone, **F64, diagnose=padding_mistakes(student),
                     what=f"prompt {row} ({len(prompt)} tokens) left padded to 5, then one step: its logits vs "
                          "the prompt alone")


def test_padding_is_never_attended_to(student):
    result = probes.padded(student, MODEL, 12, PROMPTS, PAD, tokens(12, 3, 1), tokens(13, 8))
    expect.that(result["pad_invariant"], what="each prompt's logits when the pad tokens, or the pad token's "
                                              "embedding, change", expected="unchanged", actual="changed",
                pitfalls=["padding-attended"] if cache_works_without_padding(student) else [])


def test_positions_start_at_each_prompts_first_real_token(student):
    idx, pad_mask = probes.left_pad(PROMPTS, PAD)
    seen = probes.positions_seen(student, MODEL, 14, idx, [idx.size(1)], pad_mask)[0]
    real = [row[-len(prompt):] for row, prompt in zip(seen or [[]] * 3, PROMPTS)]
    expect.equal(real, [[0, 1, 2, 3, 4], [0], [0, 1, 2]], what="positions looked up in pos_emb for the real tokens "
                 "of 3 prompts left padded to 5", pitfalls=["padding-positions"])


def test_generate_batch_equals_each_prompt_alone(student):
    result = probes.batch(student, MODEL, 15, PROMPTS, 3, PAD)
    gpt = probes.model(student, MODEL, 15)
    alone = [probes.recomputed_generation(gpt, prompt[None], 3)[0] for prompt in PROMPTS]
    for row, (got, want) in enumerate(zip(result["tokens"], alone)):
        expect.close(got, want, atol=0, rtol=0, what=f"generate_batch(3 prompts, max_new_tokens=3)[{row}] vs "
                     "the prompt generated alone", diagnose=padding_mistakes(student))
    expect.that(result["inputs_unchanged"], what="the prompts after the call", expected="unchanged", actual="modified")


def test_generate_batch_refuses_more_than_the_context(student):
    result = probes.batch_too_long(student, MODEL, 16, PROMPTS, 4, PAD)
    expect.equal(result["type"], "ValueError", what="generate_batch with a 5-token prompt and max_new_tokens=4 "
                                                    "(context_length=8): the exception raised")


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_runs_on_the_inputs_device(student, padded):
    # PyTorch's meta device stands in for a GPU: a mask or position tensor
    # created without device= lands on the CPU and meets the inputs' device.
    idx, pad_mask = probes.left_pad(PROMPTS, PAD) if padded else (tokens(19, 2, 5), None)
    result = probes.cached_placement(student, MODEL, idx, 4, pad_mask)
    expect.equal(result["placement"], "ok",
                 what="the model, idx and pad_mask on the meta device: every tensor forward_cached makes on idx's "
                      f"device (create masks and positions with device=idx.device) {result['detail']}".rstrip())


def test_uses_no_builtin_attention(student):
    probes.steps(student, MODEL, 0, tokens(17, 1, 4), [4])  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="use the shipped model's own layers")
