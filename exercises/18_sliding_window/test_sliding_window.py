"""Public tests for exercise 18. Run: pytest exercises/18_sliding_window

The oracles: the README's pictures and worked numbers; stored values made
from the reference (coursekit/fixtures/sliding_window_18.py); and
properties: a cached step must equal your own windowed recomputation of
all tokens so far, in float64 to 1e-9, at every step past the context; a
window as long as the sequence is the shipped causal attention; padding
never changes a real token's output.
"""
import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load as load_fixture
from coursekit.probes import sliding_window as probes

MODEL = {"vocab_size": 11, "context_length": 6, "d_model": 12, "num_heads": 3, "num_layers": 2}
F64 = {"atol": 1e-9, "rtol": 1e-7}
WINDOW = 3
LENGTH = 20          # past context_length=6: the ring of 3 wraps six times

# (n_query, n_key, window, offset): square, a cached chunk (offset = n_key - n_query),
# window 1, a window longer than the sequence, queries far after the keys.
MASK_CASES = [(6, 6, 3, 0), (2, 7, 3, 5), (4, 4, 1, 0), (3, 5, 9, 2), (3, 4, 2, 6)]
# name -> (seed, batch, n, window, padded)
ATTENTION_CASES = {"plain": (1, 2, 14, 3, False), "window-1": (2, 1, 9, 1, False), "padded": (3, 3, 12, 4, True)}
FORWARD_CASES = {"plain": (4, 2, LENGTH, WINDOW, False), "padded": (5, 3, 15, 2, True)}
FIELD_CASES = [(1, 4), (2, 4), (3, 4), (0, 7), (5, 1), (32, 4096)]

# The README's picture: 6 tokens, window 3 (1 = blocked).
README_MASK = torch.tensor([[0, 1, 1, 1, 1, 1],
                            [0, 0, 1, 1, 1, 1],
                            [0, 0, 0, 1, 1, 1],
                            [1, 0, 0, 0, 1, 1],
                            [1, 1, 0, 0, 0, 1],
                            [1, 1, 1, 0, 0, 0]], dtype=torch.bool)


def tokens(seed: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, MODEL["vocab_size"], shape, generator=torch.Generator().manual_seed(seed))


def pad_mask(batch: int, n: int) -> torch.Tensor:
    """Left padding: row r has r * 2 pad positions (row 0 none)."""
    mask = torch.zeros(batch, n, dtype=torch.bool)
    for row in range(batch):
        mask[row, :2 * row] = True
    return mask


def attention_case(name: str) -> dict:
    seed, batch, n, window, padded = ATTENTION_CASES[name]
    x = torch.randn(batch, n, MODEL["d_model"], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return {"config": MODEL, "seed": seed, "x": x, "window": window, "pad_mask": pad_mask(batch, n) if padded else None}


def forward_case(name: str) -> dict:
    seed, batch, n, window, padded = FORWARD_CASES[name]
    return {"config": MODEL, "seed": seed, "idx": tokens(seed, batch, n), "window": window,
            "pad_mask": pad_mask(batch, n) if padded else None}


def mask_mistakes(student, mask: torch.Tensor, n_query: int, n_key: int, window: int, offset: int):
    """Which mistake a wrong mask comes from, read off its rows and off your
    own mask without the offset (properties, not the answer)."""
    def diagnose():
        if type(mask) is not torch.Tensor or mask.shape != (n_query, n_key):
            return
        seen = ~mask.bool()
        rows = torch.arange(n_query)[:, None]
        cols = torch.arange(n_key)[None, :]
        if (seen & (cols > rows + offset)).any():
            yield "window-not-causal"
            return
        if offset and torch.equal(mask, student.sliding_window_mask(n_query, n_key, window, 0)):
            yield "window-offset-ignored"
            return
        counts = seen.sum(-1)
        full = [int(c) for i, c in enumerate(counts) if offset + i >= window and offset + i < n_key]
        if any(c in (window + 1, window - 1) for c in full):
            yield "window-off-by-one"
    return diagnose


# --- the window mask -----------------------------------------------------------

def test_mask_of_the_readme_picture(student):
    mask = student.sliding_window_mask(6, 6, 3)
    expect.close(mask, README_MASK, atol=0, rtol=0, what="sliding_window_mask(6, 6, window=3): the README's picture",
                 diagnose=mask_mistakes(student, mask, 6, 6, 3, 0))


def test_masks_of_chunks_and_odd_windows(student):
    stored = load_fixture("sliding_window_18")
    for case in MASK_CASES:
        mask = student.sliding_window_mask(*case)
        expect.close(mask, stored["mask {} {} {} {}".format(*case)], atol=0, rtol=0,
                     what="sliding_window_mask(n_query={}, n_key={}, window={}, offset={})".format(*case),
                     diagnose=mask_mistakes(student, mask, *case))


def test_a_window_below_one_is_refused(student):
    result = probes.domain_errors(student)
    expect.equal(result, {"mask": "ValueError", "cache": "ValueError", "field_window": "ValueError",
                          "field_layers": "ValueError"},
                 what="the exceptions of sliding_window_mask(3, 3, 0), RollingKVCache(2, 0), receptive_field(2, 0) "
                      "and receptive_field(-1, 3)")


# --- windowed attention and the windowed model --------------------------------------

def padding_mistakes(student, case: dict):
    def diagnose():
        result = probes.pad_invariance(student, MODEL, case["seed"], tokens(case["seed"], 3, 12), 2,
                                       pad_mask(3, 12), tokens(99, 12))
        if not result["finite"]:
            yield "softmax-all-masked-nan"
        elif not torch.allclose(result["real"], result["again"], **F64):
            yield "window-padding-ignored"
    return diagnose


def test_attention_matches_the_stored_outputs(student):
    stored = load_fixture("sliding_window_18")
    for name in ATTENTION_CASES:
        case = attention_case(name)
        result = probes.attention(student, **case)
        expect.close(result["output"], stored[f"attention {name}"], **F64,
                     what=f"sliding_window_attention, case {name!r} (n={case['x'].size(1)} > context_length=6, "
                          f"window={case['window']})",
                     diagnose=padding_mistakes(student, case) if case["pad_mask"] is not None else None)
        expect.that(result["inputs_unchanged"], what="x after the call", expected="unchanged", actual="modified")


def test_a_window_as_long_as_the_sequence_is_causal_attention(student):
    case = {**attention_case("plain"), "window": 6}
    case["x"] = case["x"][:, :6]
    result = probes.attention(student, **case)
    attn = probes.nope_model(student, MODEL, case["seed"]).blocks[0].attn
    with torch.no_grad():
        expected = attn(case["x"])            # the shipped MultiHeadAttention: causal, no window
    expect.close(result["output"], expected, **F64, what="sliding_window_attention with window=6 on 6 tokens vs "
                 "the shipped causal MultiHeadAttention",
                 diagnose=mask_mistakes(student, student.sliding_window_mask(6, 6, 3), 6, 6, 3, 0))


def test_windowed_forward_matches_the_stored_logits(student):
    stored = load_fixture("sliding_window_18")
    for name in FORWARD_CASES:
        case = forward_case(name)
        result = probes.forward(student, **case)
        expect.close(result["logits"], stored[f"forward {name}"], **F64,
                     what=f"windowed_forward, case {name!r} ({case['idx'].size(1)} tokens, context_length=6, "
                          f"window={case['window']}, no positions)",
                     diagnose=padding_mistakes(student, case) if case["pad_mask"] is not None else None)


def test_padding_is_never_attended_to(student):
    result = probes.pad_invariance(student, MODEL, 6, tokens(6, 3, 12), 2, pad_mask(3, 12), tokens(99, 12))
    expect.that(result["finite"], what="windowed_forward of a left-padded batch (a padding query's whole window "
                "is padding)", expected="finite logits everywhere", actual="NaN or inf",
                pitfalls=["softmax-all-masked-nan"])
    expect.close(result["again"], result["real"], **F64, what="the real tokens' logits when the pad tokens change",
                 pitfalls=["window-padding-ignored"])


# --- the rolling cache -------------------------------------------------------------------

def step_mistakes(student):
    """Which mistake of the cached steps a wrong result comes from: none
    when the mask is wrong already (the mask tests name that); else where
    one-token steps after a prefill of one first go wrong."""
    def diagnose():
        if not torch.equal(student.sliding_window_mask(6, 6, 3), README_MASK):
            return
        _, result, recomputed = cached(student, 11, [1] * 10)
        wrong = [t for t in range(10) if not torch.allclose(result["logits"][:, t], recomputed[:, t], **F64)]
        if wrong and wrong[0] == WINDOW + 1:      # right until the ring wraps, wrong after
            yield "window-ring-order"
        elif wrong or result["seen"] != list(range(1, 11)):
            yield "window-offset-ignored"
    return diagnose


def cached(student, seed: int, chunks: list[int]) -> tuple[torch.Tensor, dict, torch.Tensor]:
    idx = tokens(seed, 2, sum(chunks))
    result = probes.steps(student, MODEL, seed, idx, WINDOW, chunks)
    with torch.no_grad():
        recomputed = student.windowed_forward(probes.nope_model(student, MODEL, seed), idx, WINDOW)
    return idx, result, recomputed


def test_one_token_at_a_time_equals_the_recomputation_past_the_context(student):
    chunks = [2] + [1] * (LENGTH - 2)
    idx, result, recomputed = cached(student, 7, chunks)
    diagnose = step_mistakes(student)
    for t in range(2, LENGTH + 1):
        expect.close(result["logits"][:, :t], recomputed[:, :t], **F64, diagnose=diagnose,
                     what=f"forward_cached, window 3, logits of the first {t} tokens (prefill 2, then one token at a "
                          f"time) vs your windowed_forward(model, idx[:, :{t}], 3)")
    expect.equal(result["seen"], list(range(2, LENGTH + 1)), what="cache.seen after each step",
                 pitfalls=["window-offset-ignored"])
    expect.close(result["logits"], load_fixture("sliding_window_18")["steps"], **F64,
                 what="forward_cached's logits vs the stored ones (a cache and a recomputation that agree can still "
                      "both be wrong)")


def test_chunks_equal_the_recomputation(student):
    chunks = [4, 2, 5, 1, 3, 5]          # chunks longer than the window too
    idx, result, recomputed = cached(student, 8, chunks)
    expect.close(result["logits"], recomputed, **F64, what="forward_cached in chunks of 4, 2, 5, 1, 3, 5 tokens, "
                 "window 3, vs your windowed_forward(model, idx, 3)",
                 diagnose=step_mistakes(student))


def test_the_cache_holds_the_last_window_positions(student):
    _, result, _ = cached(student, 9, [2] + [1] * 8)
    expected = [min(seen, WINDOW) for seen in range(2, 11)]
    expect.equal(result["held"], expected, what="len(cache) after each step (window 3)",
                 pitfalls=["window-cache-grows"])
    expect.equal(probes.ring_sizes(result), expected, what="the positions the cache's keys and values hold after "
                 "each step (their size along dim -2)", pitfalls=["window-cache-grows"])


def test_the_ring_of_the_readme(student):
    # Keys tagged with their position, appended one position at a time.
    cache = student.RollingKVCache(1, 4)
    for p in range(7):
        tag = torch.full((1, 1, 1, 2), float(p), dtype=torch.float64)
        cache.append(0, tag, tag)
    keys, _, positions = cache.append(0, torch.full((1, 1, 1, 2), 7.0, dtype=torch.float64),
                                      torch.full((1, 1, 1, 2), 7.0, dtype=torch.float64))
    expect.equal([int(p) for p in positions], [4, 5, 6, 3, 7],
                 what="append of position 7 to a ring of 4 after positions 0..6: the positions it returns "
                      "(the README's table)",
                 pitfalls=["window-cache-grows"] if len(positions) > 5 else ["window-ring-order"])
    expect.equal(keys[0, 0, :, 0].tolist(), [4.0, 5.0, 6.0, 3.0, 7.0], what="the keys it returns: held slots, then "
                 "the new one")
    expect.equal(cache.keys[0][0, 0, :, 0].tolist(), [4.0, 5.0, 6.0, 7.0],
                 what="cache.keys[0] after it: position p in slot p % 4", pitfalls=["window-cache-grows"])


# --- the receptive field --------------------------------------------------------------

def test_receptive_field_of_the_readme(student):
    stored = load_fixture("sliding_window_18")["fields"].tolist()
    got = [student.receptive_field(layers, window) for layers, window in FIELD_CASES]
    wrong = got == [layers * window for layers, window in FIELD_CASES]
    expect.equal(got, stored, what=f"receptive_field(num_layers, window) for {FIELD_CASES}",
                 pitfalls=["receptive-field-no-minus-one"] if wrong else [])
    expect.equal(student.receptive_field(32, 4096), 131_041, what="receptive_field(32, 4096): Mistral 7B's, as the "
                 "README works it out", pitfalls=["receptive-field-no-minus-one"])


def test_does_not_modify_its_inputs(student):
    result = probes.forward(student, **forward_case("plain"))
    expect.that(result["inputs_unchanged"], what="idx after windowed_forward", expected="unchanged",
                actual="modified")
    _, steps, _ = cached(student, 10, [3, 1, 1])
    expect.that(steps["inputs_unchanged"], what="idx after forward_cached", expected="unchanged", actual="modified")


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_runs_on_the_inputs_device(student, padded):
    # PyTorch's meta device stands in for a GPU: a mask or position tensor
    # created without device= lands on the CPU and meets the inputs' device.
    result = probes.placement(student, MODEL, tokens(12, 2, 9), WINDOW, 2, pad_mask(2, 9) if padded else None)
    expect.equal(result["placement"] if result["placement"] != "unchecked" else "ok", "ok",
                 what="the model, idx (and pad_mask) on the meta device: every tensor windowed_forward and "
                      "forward_cached make on idx's device (create masks and positions with device=idx.device) "
                      f"{result['detail']}".rstrip())


def test_uses_no_builtin_attention(student):
    student.sliding_window_mask(2, 2, 1)   # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write the windowed attention with the shipped model's own layers")
