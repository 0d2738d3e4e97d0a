"""Hidden checks of exercise 07 (sinusoidal positional encoding)."""
from __future__ import annotations

import torch

from grader.checks import requiring
from grader.checks import Check, Compare, Figure, all_of, deep_close, error_type_equal, facts_equal, tensors_close, text
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.positional_encoding"
TABLE = f"{PROBES}:table"
STRUCTURE = f"{PROBES}:encoding_structure"
OUTPUT = f"{PROBES}:encoding_output"
TRAIN_EVAL = f"{PROBES}:train_eval_outputs"
TOO_LONG = f"{PROBES}:too_long_error"
ON_DEVICE = f"{PROBES}:encoding_on_device"
OUTPUT_AS = f"{PROBES}:encoding_output_as"
DEFAULT = f"{PROBES}:default_encoding"
SHIFT = f"{PROBES}:shift_matrix"
SHIFT_ERROR = f"{PROBES}:shift_error"

TABLE_PITFALLS = ("pe-sin-cos-swapped", "pe-index-not-doubled")
# sin/cos of angles in the thousands: float32 rounds the angle itself to
# ~2.4e-4 at 5000, so equally correct formulas (exp vs pow, float32 vs
# float64 angles) agree only to ~1e-3 there.
LONG_ATOL = 1e-3


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A uniform int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _buffer_facts(result: object) -> dict:
    """What matters about the registered table, ignoring anything else a
    solution may register."""
    if not isinstance(result, dict):
        return {}
    return {
        "parameters": result.get("parameters"),
        "pe_buffer": (result.get("buffers") or {}).get("pe"),
        "pe_plain_attribute": "pe" in (result.get("tensor_attributes") or []),
        "pe_saved": "pe" in (result.get("state_dict_keys") or []),
        "pe_after_to_float64": (result.get("dtypes_after_to_float64") or {}).get("pe"),
    }


def buffer_compare(submitted: object, expected: object) -> str | None:
    mine, theirs = _buffer_facts(submitted), _buffer_facts(expected)
    if mine.get("parameters") != theirs.get("parameters"):
        return "has trainable parameters; the table is not trained"
    if mine != theirs:
        return "pe is not a registered buffer of the right shape and dtype, saved in state_dict and converted by .to()"
    return None


# --- calls -------------------------------------------------------------------

def _tables(gen: torch.Generator) -> list[ProbeCall]:
    sizes = [(1, 1), (4, 3), (2, 2), (17, 9)]
    sizes += [(_int(gen, 1, 40), _int(gen, 1, 33)) for _ in range(8)]
    return [ProbeCall(TABLE, {"max_len": m, "d_model": d}) for m, d in sizes]


def _long_tables(gen: torch.Generator) -> list[ProbeCall]:
    # Full default length, a wide table and a wide odd one: the slow pairs
    # only show their frequency far down the table.
    sizes = [(5000, 12), (2048, 130), (1000, 257)]
    return [ProbeCall(TABLE, {"max_len": m, "d_model": d}) for m, d in sizes]


def _structures(gen: torch.Generator) -> list[ProbeCall]:
    configs = [(8, 16, 0.0), (7, 5, 0.1), (_int(gen, 1, 24), _int(gen, 1, 30), 0.3)]
    return [ProbeCall(STRUCTURE, {"d_model": d, "max_len": m, "dropout": p}) for d, m, p in configs]


def _devices(gen: torch.Generator) -> list[ProbeCall]:
    # The meta device, not a forward on it: meta kernels cost seconds to
    # load on first use, while moving tensors there is free.
    return [ProbeCall(ON_DEVICE, {"d_model": 6, "max_len": 10}), ProbeCall(ON_DEVICE, {"d_model": 5, "max_len": 4})]


def _eval_outputs(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(8):
        d_model, max_len = _int(gen, 1, 17), _int(gen, 1, 12)
        n = max_len if i % 3 == 0 else _int(gen, 1, max_len)  # n == max_len is allowed
        dtype = torch.float64 if i % 4 == 3 else torch.float32
        x = torch.randn(_int(gen, 1, 3), n, d_model, generator=gen).to(dtype)
        # dropout > 0 in eval mode must change nothing.
        calls.append(ProbeCall(OUTPUT, {"x": x, "d_model": d_model, "max_len": max_len,
                                        "dropout": 0.5 if i % 2 else 0.0}))
    return calls


def _as_float64(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for d_model, max_len, n in [(6, 9, 9), (7, 20, 11)]:
        x = torch.randn(2, n, d_model, generator=gen, dtype=torch.float64)
        calls.append(ProbeCall(OUTPUT_AS, {"x": x, "d_model": d_model, "max_len": max_len, "dtype": torch.float64}))
    return calls


def _train_outputs(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for i in range(4):
        d_model, max_len = _int(gen, 2, 16), _int(gen, 3, 12)
        x = torch.randn(_int(gen, 1, 3), _int(gen, 1, max_len), d_model, generator=gen)
        calls.append(ProbeCall(OUTPUT, {"x": x, "d_model": d_model, "max_len": max_len,
                                        "dropout": [0.1, 0.3, 0.5, 0.7][i], "train": True, "seed": 11 + i}))
    x = torch.randn(2, 5, 8, generator=gen)
    calls.append(ProbeCall(TRAIN_EVAL, {"x": x, "d_model": 8, "dropout": 0.4, "max_len": 6}))
    return calls


def _too_long(gen: torch.Generator) -> list[ProbeCall]:
    calls = [ProbeCall(TOO_LONG, {"d_model": d, "max_len": m, "n": n})
             for d, m, n in [(4, 3, 4), (5, 1, 2), (8, 10, 37), (6, 10, 10)]]
    return calls + [ProbeCall(DEFAULT, {"d_model": 3})]


def _shifts(gen: torch.Generator, far: bool) -> list[ProbeCall]:
    if far:
        cases = [(1000, 8), (-2500, 64), (4999, 16), (-731, 130)]
    else:
        cases = [(0, 4), (1, 2), (-1, 6), (3, 16), (-7, 10)]
        cases += [(_int(gen, -60, 60), 2 * _int(gen, 1, 20)) for _ in range(5)]
    return [ProbeCall(SHIFT, {"delta": delta, "d_model": d}) for delta, d in cases]


def _shift_errors(gen: torch.Generator) -> list[ProbeCall]:
    cases = [(1, 1), (0, 3), (-2, 7), (5, 33), (2, 8), (0, 2)]
    return [ProbeCall(SHIFT_ERROR, {"delta": delta, "d_model": d}) for delta, d in cases]


CHECKS = [
    Check(
        id="07-table",
        weight=3,
        message=text("sinusoidal_table: every entry, dtype and shape, for many sizes including odd d_model",
                     "sinusoidal_table：多种尺寸（含奇数 d_model）下的每个元素、dtype 与形状"),
        calls=_tables,
        compare=tensors_close(),
        pitfalls=TABLE_PITFALLS,
    ),
    Check(
        id="07-table-long",
        weight=2,
        message=text("sinusoidal_table for long tables and wide d_model (thousands of positions)",
                     "长表与较大 d_model 下的 sinusoidal_table（数千个位置）"),
        calls=_long_tables,
        compare=tensors_close(atol=LONG_ATOL, rtol=0.0),
        pitfalls=TABLE_PITFALLS,
        seed=1,
    ),
    Check(
        id="07-pe-buffer",
        weight=2,
        message=text("PositionalEncoding: pe is a registered buffer (1, max_len, d_model) holding the table, "
                     "saved in state_dict, converted by .to(torch.float64), with no trainable parameter",
                     "PositionalEncoding：pe 是形状 (1, max_len, d_model) 的已注册 buffer，内容为位置编码表，"
                     "保存在 state_dict 中、会被 .to(torch.float64) 转换，且没有可训练参数"),
        calls=_structures,
        # The table's values are checked through forward (07-forward), so a
        # wrong table is not reported here as a buffer problem.
        compare=buffer_compare,
        pitfalls=("mask-not-buffer",),
        seed=2,
    ),
    Check(
        id="07-moves-with-module",
        weight=1,
        message=text("after .to(device) the table moves along with the module (as it must for a GPU)",
                     "调用 .to(device) 后位置编码表随模块一起移动（在 GPU 上必须如此）"),
        calls=_devices,
        compare=facts_equal("pe_device", "devices", reason="a tensor stays behind on the old device"),
        pitfalls=("mask-not-buffer",),
        seed=3,
    ),
    Check(
        id="07-forward",
        weight=3,
        message=text("forward in eval mode: x + pe[:, :n] for random sizes (n == max_len too), float32 and "
                     "float64 inputs, x left unchanged, gradient with respect to x",
                     "eval 模式下的 forward：随机尺寸（含 n == max_len）、float32 与 float64 输入时为 x + pe[:, :n]，"
                     "不修改 x，以及对 x 的梯度"),
        calls=_eval_outputs,
        compare=all_of(facts_equal("input_unchanged", reason="modified its input"), deep_close(ignore=("pe",))),
        pitfalls=("pe-added-twice",),
        seed=4,
    ),
    Check(
        id="07-float64-module",
        weight=1,
        message=text("a module converted with .to(torch.float64) adds a float64 table to float64 inputs",
                     "经 .to(torch.float64) 转换后的模块对 float64 输入加上 float64 的位置编码表"),
        calls=_as_float64,
        compare=all_of(facts_equal("pe_dtype", reason="pe keeps its dtype after .to(torch.float64)"),
                       deep_close(atol=1e-6, rtol=1e-6)),
        # No declared pitfall: wrong values here come from any forward bug;
        # variants that fail alike are still shown (confirmed).
        seed=5,
    ),
    Check(
        id="07-dropout",
        weight=2,
        message=text("training mode: dropout applied once, to x + pe, with the same random mask as nn.Dropout; "
                     "no dropout in eval mode",
                     "训练模式：对 x + pe 只做一次 dropout，随机掩码与 nn.Dropout 相同；eval 模式下不做 dropout"),
        calls=_train_outputs,
        compare=all_of(facts_equal("input_unchanged", reason="modified its input"), deep_close(ignore=("pe",))),
        pitfalls=("pe-added-twice",),
        seed=6,
    ),
    Check(
        id="07-too-long",
        weight=1,
        message=text("inputs longer than max_len raise ValueError; the default max_len is 5000",
                     "输入长度超过 max_len 时抛出 ValueError；max_len 默认为 5000"),
        calls=_too_long,
        compare=all_of(error_type_equal(), error_type_equal("error_5001"),
                       facts_equal("pe_shape", reason="wrong default max_len")),
        seed=7,
    ),
    Check(
        id="07-relative-shift",
        weight=2,
        message=text("relative_shift for several shifts (0 and negative ones included) and even d_model: "
                     "values, shape and float32 dtype",
                     "多种平移量（含 0 与负数）和偶数 d_model 下的 relative_shift：数值、形状与 float32 dtype"),
        calls=lambda gen: _shifts(gen, far=False),
        compare=tensors_close(),
        seed=8,
    ),
    Check(
        id="07-relative-shift-far",
        weight=1,
        message=text("relative_shift for shifts of thousands of positions", "平移数千个位置时的 relative_shift"),
        calls=lambda gen: _shifts(gen, far=True),
        compare=tensors_close(atol=LONG_ATOL, rtol=0.0),
        seed=9,
    ),
    Check(
        id="07-relative-shift-odd",
        weight=1,
        message=text("relative_shift raises ValueError for odd d_model, and only then",
                     "relative_shift 仅在 d_model 为奇数时抛出 ValueError"),
        calls=_shift_errors,
        compare=error_type_equal(),
        seed=10,
    ),
]


# The table the README plots (d_model = 32), first 50 positions.
FIGURES = [
    Figure(
        name="pe-table",
        title=text("sinusoidal_table(50, 32): rows are positions, columns dimensions",
                   "sinusoidal_table(50, 32)：行是位置，列是维度"),
        call=ProbeCall("coursekit.probes.positional_encoding:table", {"max_len": 50, "d_model": 32}),
    ),
]

# Buffers, devices and errors count only once the module and the shift they are about work.
CHECKS = requiring(CHECKS, {
    "07-pe-buffer": ("07-forward",),
    "07-moves-with-module": ("07-forward",),
    "07-too-long": ("07-forward",),
    "07-relative-shift-odd": ("07-relative-shift",),
})
