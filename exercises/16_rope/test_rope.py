"""Public tests for exercise 16. Run: pytest exercises/16_rope

The oracles: the numbers of the README's worked example; stored values
that the reference gives on these inputs (coursekit/fixtures/rope_16.py,
with what the mistakes the hints name give, for the diagnoses); and
RoPE's own properties, checked on your code alone: the scores of rotated
queries and keys depend on i - j only, a rotation keeps every norm, the
cached forward equals your model's full forward at every step, and a
left-padded prompt gets what it gets alone.
"""
import functools

import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load
from coursekit.probes import rope as probes



@functools.cache
def stored() -> dict[str, torch.Tensor]:
    return load("rope_16")

F64 = {"atol": 1e-9, "rtol": 1e-7}

# The mistakes whose stored values the diagnoses compare with (the
# fixtures hold the values of the reference with each one of them).
ROTATION_MISTAKES = ("rope-halves-pairing", "rope-angle-exponent", "rope-positions-axis")
ATTENTION_MISTAKES = ("rope-values-rotated", "rope-before-split")


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- inputs (read by grader/fixtures_rope.py as well: the values stay in step) ---

ANGLE_CASES = {"6x4": (6, 4, None), "5x8 base 100": (5, 8, 100.0)}
ROTATE_CASES = {"per token": (2, 3, 5, 8, False), "per sequence": (2, 3, 4, 6, True),
                "per sequence b=h": (2, 2, 4, 6, True)}
ATTENTION_CASES = {"default": None, "positions": "per token", "per sequence": "per sequence"}
MODEL = {"vocab_size": 11, "context_length": 8, "d_model": 12, "num_heads": 3, "num_layers": 2}
PAD = MODEL["vocab_size"] - 1     # never a prompt token here
PROMPTS = [torch.tensor([3, 1, 4, 1, 5]), torch.tensor([9]), torch.tensor([2, 6, 5])]


def rotate_case(key: str) -> tuple[torch.Tensor, torch.Tensor]:
    """x (b, h, n, hd) in float64 and its positions, (n,) or (b, n)."""
    b, h, n, hd, per_sequence = ROTATE_CASES[key]
    x = torch.randn(b, h, n, hd, generator=gen(len(key)), dtype=torch.float64)
    if per_sequence:
        return x, torch.arange(n)[None, :] + torch.tensor([[0], [7]])
    return x, torch.tensor([0, 3, 1, 40, 2])


def attention_case(key: str) -> tuple[dict, int, torch.Tensor, torch.Tensor | None]:
    """RoPEMultiHeadAttention's config, weight seed, x (2, 5, 6) and positions."""
    config = {"d_in": 6, "d_out": 12, "context_length": 6, "dropout": 0.0, "num_heads": 3}
    x = torch.randn(2, 5, 6, generator=gen(7), dtype=torch.float64)
    positions = {None: None, "per token": torch.arange(5) + 2,
                 "per sequence": torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])}[ATTENTION_CASES[key]]
    return config, 5, x, positions


def tokens(seed: int, *shape: int, high: int = PAD) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen(seed))


def mistakes(key: str, actual, names) -> callable:
    """A diagnosis: the mistakes whose stored values ``actual`` equals."""
    def diagnose():
        for name in names:
            value = stored().get(f"{key} {name}")
            if value is not None and isinstance(actual, torch.Tensor) and actual.shape == value.shape \
                    and torch.allclose(actual, value, atol=1e-6, rtol=1e-6):
                yield name
    return diagnose


# --- the angles and the rotation -------------------------------------------------

@pytest.mark.parametrize("key", ANGLE_CASES)
def test_the_angle_table(student, key):
    context_length, head_dim, base = ANGLE_CASES[key]
    result = probes.angles(student, context_length, head_dim, base)
    for part in ("cos", "sin"):
        expect.close(result[part], stored()[f"angles {key} {part}"], **F64,
                     what=f"rope_angles({context_length}, {head_dim}{'' if base is None else f', base={base}'}, "
                          f"dtype=torch.float64)[{0 if part == 'cos' else 1}] ({part}: rows = positions, columns = pairs)",
                     diagnose=mistakes(f"angles {key} {part}", result[part], ["rope-angle-exponent"]))


def test_the_readme_worked_example(student):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64).reshape(1, 1, 1, 4)
    # README.md, 'A worked example': the pair (1, 2) turns by 1 radian, (3, 4) by 0.01.
    expected = torch.tensor([-1.1426, 1.9221, 2.9599, 4.0298], dtype=torch.float64).reshape(1, 1, 1, 4)
    result = probes.rotate(student, x, torch.tensor([1]))
    expect.close(result["rotated"], expected, atol=1e-4, rtol=0,
                 what="apply_rope of q = (1, 2, 3, 4) at position 1, head_dim 4 (README, worked example)",
                 diagnose=mistakes("worked example", result["rotated"], ROTATION_MISTAKES))


@pytest.mark.parametrize("key", ROTATE_CASES)
def test_apply_rope_values(student, key):
    x, positions = rotate_case(key)
    what = f"apply_rope(x {tuple(x.shape)}, positions {tuple(positions.shape)}) ({key})"
    with expect.no_error(what=what, pitfalls=["rope-positions-axis"], match="must match the size"):
        result = probes.rotate(student, x, positions)
    expect.close(result["rotated"], stored()[f"rotate {key}"], **F64, what=what,
                 diagnose=mistakes(f"rotate {key}", result["rotated"], ROTATION_MISTAKES))
    expect.that(result["inputs_unchanged"], what="x after apply_rope", expected="unchanged (return a new tensor)",
                actual="modified")


def test_an_odd_head_dim_raises(student):
    found = probes.odd_head_dim(student, 5, 2)
    for name, call in (("angles", "rope_angles(4, head_dim=5)"), ("apply", "apply_rope on x (1, 2, 3, 5)"),
                       ("attention", "RoPEMultiHeadAttention(10, 10, 4, 0.0, num_heads=2): head_dim 5")):
        expect.equal(found[name]["type"], "ValueError", what=f"{call}: the exception raised")


def test_scores_depend_on_i_minus_j_and_norms_are_kept(student):
    q = torch.randn(2, 3, 6, 8, generator=gen(11), dtype=torch.float64)
    k = torch.randn(2, 3, 6, 8, generator=gen(12), dtype=torch.float64)
    result = probes.shifted(student, q, k, torch.arange(6), 37)
    expect.that(result["norms_kept"], what="the norm of every query and key vector after apply_rope",
                expected="unchanged (a rotation keeps lengths)", actual="changed")
    expect.that(result["relative"], what="the scores q_i·k_j of queries and keys rotated at positions 0..5, "
                                         "then at 37..42", expected="equal (they depend on i - j only)",
                actual="different")


# --- RoPE in attention and in a GPT ------------------------------------------------

@pytest.mark.parametrize("key", ATTENTION_CASES)
def test_attention_values(student, key):
    config, seed, x, positions = attention_case(key)
    result = probes.attention(student, config, seed, x, positions, 5)
    got = result["default"] if positions is None else result["output"]
    expect.equal(result["load"], {"missing": [], "unexpected": []},
                 what="exercise 06's parameter names loaded into RoPEMultiHeadAttention (missing, unexpected)")
    expect.close(got, stored()[f"attention {key}"], **F64,
                 what=f"RoPEMultiHeadAttention(6, 12, 6, 0.0, 3) on x (2, 5, 6), positions "
                      f"{'None' if positions is None else tuple(positions.shape)}",
                 diagnose=mistakes(f"attention {key}", got, ROTATION_MISTAKES + ATTENTION_MISTAKES))


def test_attention_output_does_not_move_when_every_position_shifts(student):
    config, seed, x, positions = attention_case("positions")
    result = probes.attention(student, config, seed, x, positions, 30)
    expect.close(result["shifted"], result["output"], **F64, pitfalls=["rope-values-rotated"],
                 what="RoPEMultiHeadAttention's output at positions 2..6, then at 32..36")


def test_gpt_without_position_embeddings(student):
    idx = tokens(3, 2, 7)
    result = probes.gpt_logits(student, MODEL, 3, idx)
    expect.that(not [p for p in result["parameters"] if p.startswith("pos_emb")], what="RoPEGPT's parameters",
                expected="no pos_emb (positions enter through RoPE)", actual="a pos_emb table")
    expect.equal(result["load"], {"missing": [], "unexpected": []},
                 what="exercise 12's parameter names (without pos_emb) loaded into RoPEGPT (missing, unexpected)")
    expect.close(result["logits"], stored()["logits"], **F64, what="RoPEGPT(11, 8, 12, 3, 2) logits of 2 x 7 tokens",
                 diagnose=mistakes("logits", result["logits"], ROTATION_MISTAKES + ATTENTION_MISTAKES))


# --- with a KV cache -------------------------------------------------------------

def cache_mistakes(student, idx: torch.Tensor, chunks: list[int]):
    def diagnose():
        seen = probes.positions_seen(student, MODEL, 4, idx, chunks)
        starts = [sum(chunks[:i]) for i in range(len(chunks))]
        expected = [[list(range(s, s + size))] * idx.size(0) for s, size in zip(starts, chunks)]
        if all(row is not None for row in seen) and seen != expected:
            yield "cache-position-offset"
    return diagnose


@pytest.mark.parametrize("chunks", [[3, 1, 1, 1, 1, 1], [1] * 8, [2, 3, 1, 2]], ids=["prefill-3", "one-by-one", "chunks"])
def test_cached_steps_equal_the_full_forward(student, chunks):
    idx = tokens(4, 2, sum(chunks))
    result = probes.steps(student, MODEL, 4, idx, chunks)
    expect.close(result["logits"], result["full"], **F64, diagnose=cache_mistakes(student, idx, chunks),
                 what=f"forward_cached in chunks of {chunks} vs your model(idx) (the same RoPEGPT, float64)")
    expect.equal(result["lengths"], [sum(chunks[:i + 1]) for i in range(len(chunks))], what="len(cache) after each step")


def padding_mistakes(student, next_ids: torch.Tensor):
    def diagnose():
        result = probes.padded(student, MODEL, 6, PROMPTS, PAD, next_ids)
        if not all(torch.isfinite(row).all() for row in result["rows"]):
            yield "softmax-all-masked-nan"
            return
        idx, pad_mask = probes.left_pad(PROMPTS, PAD)
        full_idx = torch.cat([idx, next_ids], dim=1)
        full_mask = torch.cat([pad_mask, torch.zeros_like(pad_mask[:, :1])], dim=1)
        seen = probes.positions_seen(student, MODEL, 6, full_idx, [idx.size(1), 1], full_mask)
        real = [len(p) for p in PROMPTS]
        if seen[1] is not None and [row[0] for row in seen[1]] != real:
            yield "rope-padding-positions"
        else:
            yield "padding-attended"
    return diagnose


def test_left_padded_prompts_get_their_own_logits(student):
    next_ids = tokens(6, 3, 1)
    result = probes.padded(student, MODEL, 6, PROMPTS, PAD, next_ids)
    for row, prompt in enumerate(PROMPTS):
        expect.close(result["rows"][row], result["alone"][row], **F64, diagnose=padding_mistakes(student, next_ids),
                     what=f"prompt {row} ({len(prompt)} tokens) left padded to 5, then one step through forward_cached: "
                          "its logits vs your model(prompt + its next token) alone")


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_runs_on_the_inputs_device(student, padded):
    # PyTorch's meta device stands in for a GPU: positions, angles or masks
    # created without device= land on the CPU and meet the inputs' device.
    idx, pad_mask = probes.left_pad(PROMPTS, PAD) if padded else (tokens(19, 2, 5), None)
    result = probes.cached_placement(student, MODEL, idx, 4, pad_mask)
    expect.equal(result["placement"], "ok",
                 what="the model, idx and pad_mask on the meta device: every tensor forward_cached and RoPEGPT make "
                      f"on idx's device (device=idx.device, device=x.device) {result['detail']}".rstrip())


def test_uses_no_builtin_attention(student):
    probes.attention(student, *attention_case("default"), 1)   # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write the attention with matrix products and softmax")
