"""Public tests for exercise 07. Run: pytest exercises/07_positional_encoding"""
import math

import pytest
import torch

from coursekit import expect
from coursekit.probes.positional_encoding import (
    encoding_output,
    encoding_structure,
    shift_error,
    shift_matrix,
    table,
    too_long_error,
    train_eval_outputs,
)


def formula(p: int, j: int, d_model: int) -> float:
    """PE[p, j] straight from the definition (README.md, 'The table')."""
    angle = p / 10000 ** (2 * (j // 2) / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


def formula_table(max_len: int, d_model: int) -> torch.Tensor:
    return torch.tensor([[formula(p, j, d_model) for j in range(d_model)] for p in range(max_len)])


def table_pitfalls(result: torch.Tensor) -> list[str]:
    """Which mistake a wrong table most likely comes from: row 0 must read
    0, 1, 0, 1, ... (sin 0, cos 0) whatever the frequencies are."""
    d_model = result.shape[-1]
    first_row = torch.tensor([float(j % 2) for j in range(d_model)])
    if result.shape[0] and not torch.allclose(result[0].float(), first_row, atol=1e-4):
        return ["pe-sin-cos-swapped"]
    return ["pe-index-not-doubled"]


def doubling_pitfalls(output: torch.Tensor, x: torch.Tensor, pe: torch.Tensor) -> list[str]:
    """pe-added-twice when the output is 2x + PE instead of x + PE."""
    if isinstance(output, torch.Tensor) and output.shape == x.shape and torch.allclose(output, 2 * x + pe, atol=1e-4):
        return ["pe-added-twice"]
    return []


# --- sinusoidal_table ------------------------------------------------------

@pytest.mark.parametrize("max_len,d_model", [(10, 4), (7, 6), (3, 5), (2, 1)])
def test_table_shape_and_dtype(student, max_len, d_model):
    result = table(student, max_len, d_model)
    expect.shape(result, (max_len, d_model), what=f"sinusoidal_table({max_len}, {d_model})")
    expect.equal(str(result.dtype), "torch.float32", what=f"dtype of sinusoidal_table({max_len}, {d_model})")


def test_row_zero_is_sin_0_cos_0(student):
    result = table(student, 3, 8)
    expect.close(
        result[0], torch.tensor([0.0, 1.0] * 4),
        what="row p = 0 of sinusoidal_table(3, 8): sin(0) = 0 on even columns, cos(0) = 1 on odd ones",
        pitfalls=["pe-sin-cos-swapped"],
    )


def test_worked_example(student):
    # d_model = 4: pair 0 turns with frequency 1, pair 1 with 1/10000^(2/4) = 0.01.
    expected = torch.tensor([
        [0.0, 1.0, 0.0, 1.0],
        [0.841471, 0.540302, 0.010000, 0.999950],
        [0.909297, -0.416147, 0.019999, 0.999800],
    ])
    result = table(student, 3, 4)
    expect.close(result, expected, what="sinusoidal_table(3, 4) (the worked example of README.md)",
                 atol=1e-5, pitfalls=table_pitfalls(result))


@pytest.mark.parametrize("max_len,d_model", [(50, 16), (20, 7)])
def test_every_entry_follows_the_formula(student, max_len, d_model):
    result = table(student, max_len, d_model)
    expect.close(
        result, formula_table(max_len, d_model),
        what=f"sinusoidal_table({max_len}, {d_model}) against PE[p, 2i] = sin(p / 10000^(2i/d)), "
             f"PE[p, 2i+1] = cos(p / 10000^(2i/d))" + (" (odd d_model: the last column is a sine)" if d_model % 2 else ""),
        pitfalls=table_pitfalls(result),
    )


# --- PositionalEncoding ------------------------------------------------------

def test_pe_is_a_registered_buffer(student):
    found = encoding_structure(student, d_model=6, max_len=20)
    expect.that(
        "pe" in found["buffers"], what="PositionalEncoding(6, max_len=20).pe",
        expected="a buffer registered with self.register_buffer('pe', ...)",
        actual=("a plain tensor attribute" if "pe" in found["tensor_attributes"]
                else "a parameter" if "pe" in found["parameters"] else "no buffer named pe"),
        pitfalls=["mask-not-buffer"],
    )
    expect.equal(found["buffers"]["pe"]["shape"], [1, 20, 6], what="shape of the pe buffer (1, max_len, d_model)")
    expect.equal(found["parameters"], {}, what="trainable parameters of PositionalEncoding (the table is fixed)")


def test_pe_holds_the_table(student):
    found = encoding_structure(student, d_model=6, max_len=20)
    expect.close(found["pe"], formula_table(20, 6).unsqueeze(0),
                 what="PositionalEncoding(6, max_len=20).pe, against the formula",
                 pitfalls=table_pitfalls(found["pe"][0]) if isinstance(found["pe"], torch.Tensor) else [])


def test_to_float64_moves_pe(student):
    found = encoding_structure(student, d_model=4, max_len=10)
    expect.equal(found["dtypes_after_to_float64"].get("pe"), "torch.float64",
                 what="dtype of pe after PositionalEncoding(4, max_len=10).to(torch.float64)",
                 pitfalls=["mask-not-buffer"])


def own_pe(result: dict, n: int, what: str) -> torch.Tensor:
    """The first n rows of the module's own pe: forward is checked against the
    module's table, and the table against the formula (test_pe_holds_the_table)."""
    pe = result["pe"]
    expect.that(isinstance(pe, torch.Tensor) and pe.dim() == 3 and pe.shape[1] >= n, what=f"{what}: its pe",
                expected=f"a tensor of shape (1, max_len, d_model) with max_len >= {n}",
                actual=f"shape {tuple(pe.shape)}" if isinstance(pe, torch.Tensor) else "no tensor attribute pe")
    return pe[:, :n]


def test_forward_adds_the_table(student):
    x = torch.randn(2, 7, 6, generator=torch.Generator().manual_seed(7))
    result = encoding_output(student, x, d_model=6, max_len=20)
    pe = own_pe(result, 7, "PositionalEncoding(6, max_len=20)")
    expect.close(result["output"], x + pe, what="PositionalEncoding(6, max_len=20) on a (2, 7, 6) input: x + pe[:, :7]",
                 pitfalls=doubling_pitfalls(result["output"], x, pe))


def test_forward_on_zeros_gives_the_table(student):
    result = encoding_output(student, torch.zeros(1, 5, 8), d_model=8, max_len=5)
    expect.close(result["output"], formula_table(5, 8).unsqueeze(0),
                 what="PositionalEncoding(8, max_len=5) on zeros of shape (1, 5, 8): the table itself",
                 pitfalls=table_pitfalls(result["output"][0]) if isinstance(result["output"], torch.Tensor) else [])


def test_default_max_len_is_5000(student):
    x = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(8))
    result = encoding_output(student, x, d_model=4)
    expect.equal(tuple(result["pe"].shape) if isinstance(result["pe"], torch.Tensor) else None, (1, 5000, 4),
                 what="shape of pe for PositionalEncoding(4) with the default max_len")
    pe = result["pe"][:, :3]
    expect.close(result["output"], x + pe, what="PositionalEncoding(4) on a (1, 3, 4) input: x + pe[:, :3]",
                 pitfalls=doubling_pitfalls(result["output"], x, pe))


def test_gradient_reaches_the_input_once(student):
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(9))
    result = encoding_output(student, x, d_model=6, max_len=10)
    expect.that(result["input_grad"] is not None, what="gradient of the output with respect to x",
                expected="a gradient (do not detach x)", actual="none")
    expect.close(
        result["input_grad"], torch.ones_like(x),
        what="d sum(PositionalEncoding(x)) / dx in eval mode: each x appears once in x + PE",
        pitfalls=["pe-added-twice"] if torch.allclose(result["input_grad"], 2 * torch.ones_like(x)) else [],
    )


def test_does_not_modify_its_input(student):
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(10))
    result = encoding_output(student, x, d_model=6, max_len=10)
    expect.that(result["input_unchanged"], what="the input x after the call",
                expected="unchanged (write x + pe, not x += pe)", actual="modified in place")


def test_input_as_long_as_max_len_works(student):
    x = torch.randn(1, 6, 4, generator=torch.Generator().manual_seed(11))
    result = encoding_output(student, x, d_model=4, max_len=6)
    pe = own_pe(result, 6, "PositionalEncoding(4, max_len=6)")
    expect.close(result["output"], x + pe,
                 what="PositionalEncoding(4, max_len=6) on an input of length 6 (= max_len)",
                 pitfalls=doubling_pitfalls(result["output"], x, pe))


def test_too_long_input_raises_value_error(student):
    error = too_long_error(student, d_model=4, max_len=6, n=7)
    expect.that(
        error is not None and error["type"] == "ValueError",
        what="PositionalEncoding(4, max_len=6) on an input of length 7",
        expected="ValueError (the table has only max_len rows)",
        actual="no error" if error is None else f"{error['type']}: {error['message']}",
    )


def test_dropout_acts_on_x_plus_pe_in_training_only(student):
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(12))
    outputs = train_eval_outputs(student, x, d_model=8, dropout=0.5)
    summed = x + own_pe(outputs, 5, "PositionalEncoding(8, dropout=0.5)")
    expect.that(not torch.equal(outputs["train_0"], outputs["train_1"]),
                what="PositionalEncoding(8, dropout=0.5) in training mode, under two seeds",
                expected="different outputs (dropout is random)", actual="identical outputs: dropout never applied",
                pitfalls=["dropout-typo"])
    expect.that(torch.equal(outputs["eval_0"], outputs["eval_1"]),
                what="PositionalEncoding(8, dropout=0.5) in eval mode, under two seeds",
                expected="identical outputs (no dropout in eval mode)", actual="different outputs",
                pitfalls=["dropout-in-eval"])
    expect.close(outputs["eval_0"], summed, what="PositionalEncoding(8, dropout=0.5) in eval mode: x + pe",
                 pitfalls=doubling_pitfalls(outputs["eval_0"], x, summed - x))
    kept = outputs["train_0"] != 0
    expect.close(outputs["train_0"][kept], 2 * summed[kept],
                 what="entries that dropout keeps in training mode (p = 0.5): (x + pe) / (1 - p)")


# --- relative_shift ------------------------------------------------------------

def test_shift_shape_and_dtype(student):
    result = shift_matrix(student, 1, 8)
    expect.shape(result, (8, 8), what="relative_shift(1, 8)")
    expect.equal(str(result.dtype), "torch.float32", what="dtype of relative_shift(1, 8)")


@pytest.mark.parametrize("delta", [1, 3, -2, 0])
def test_shift_moves_every_row(student, delta):
    d_model, max_len = 8, 40
    full = formula_table(max_len, d_model).double()
    result = shift_matrix(student, delta, d_model)
    expect.shape(result, (d_model, d_model), what=f"relative_shift({delta}, {d_model})")
    rows = range(max(0, -delta), max_len - max(0, delta))
    moved = full[list(rows)] @ result.double().T
    target = full[[p + delta for p in rows]]
    hint = ""
    if torch.allclose(full[list(rows)] @ result.double(), target, atol=1e-5) and delta:
        hint = " (table[p] @ M matches instead: you built the transpose of M)"
    expect.that(
        torch.allclose(moved, target, atol=1e-5),
        what=f"table[p] @ M.T for M = relative_shift({delta}, {d_model}), every p from {rows.start} to {rows.stop - 1}",
        expected=f"table[p + {delta}]",
        actual=f"largest difference {float((moved - target).abs().max()):.3g}{hint}",
    )


def test_shift_block_of_the_first_pair(student):
    # Pair 0 has frequency 1, so its block is the README's matrix with angle delta * 1.
    result = shift_matrix(student, 1, 4)
    c, s = math.cos(1.0), math.sin(1.0)
    expect.close(result[:2, :2], torch.tensor([[c, s], [-s, c]]),
                 what="the top-left 2x2 block of relative_shift(1, 4): [[cos 1, sin 1], [-sin 1, cos 1]]")


def test_shift_is_block_diagonal_and_orthogonal(student):
    d_model = 10
    result = shift_matrix(student, 5, d_model)
    outside = torch.ones(d_model, d_model, dtype=torch.bool)
    for i in range(0, d_model, 2):
        outside[i:i + 2, i:i + 2] = False
    expect.that(bool((result[outside] == 0).all()), what="relative_shift(5, 10) outside its 2x2 diagonal blocks",
                expected="exactly zero: each (sin, cos) pair only mixes with itself",
                actual=f"{int((result[outside] != 0).sum())} non-zero entries")
    expect.close(result @ result.T, torch.eye(d_model), what="M @ M.T for M = relative_shift(5, 10): a rotation")


def test_shifts_compose(student):
    expect.close(shift_matrix(student, 2, 6) @ shift_matrix(student, 3, 6), shift_matrix(student, 5, 6),
                 what="relative_shift(2, 6) @ relative_shift(3, 6) against relative_shift(5, 6)")
    expect.close(shift_matrix(student, 4, 6) @ shift_matrix(student, -4, 6), torch.eye(6),
                 what="relative_shift(4, 6) @ relative_shift(-4, 6): shifting back undoes the shift")


def test_shift_of_a_large_delta(student):
    d_model = 8
    full = formula_table(1010, d_model).double()
    result = shift_matrix(student, 1000, d_model).double()
    expect.close(full[:10] @ result.T, full[1000:1010], atol=1e-3,
                 what="table[p] @ relative_shift(1000, 8).T against table[p + 1000], p = 0..9")


def test_shift_of_an_odd_d_model_raises_value_error(student):
    shift_matrix(student, 1, 4)  # a stub has nothing to check yet
    error = shift_error(student, 1, 5)
    expect.that(
        error is not None and error["type"] == "ValueError",
        what="relative_shift(1, 5): an odd d_model",
        expected="ValueError (the last sine has no cosine partner, see README.md)",
        actual="no error" if error is None else f"{error['type']}: {error['message']}",
    )
