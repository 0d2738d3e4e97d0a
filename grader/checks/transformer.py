"""Hidden checks of exercise 11 (the encoder-decoder Transformer).

Every probe builds the model from a config and gives it weights that depend
only on a seed and the parameter names (``init_by_name``), so a submission
that creates its layers in another order still gets the reference's weights.
Outputs at padded target positions are never compared: the target padding
mask changes only them, and the README allows leaving it out.
"""
from __future__ import annotations

import torch

from grader.checks import (ATTENTION_LAYER, Check, Compare, Figure, all_of, no_forbidden_calls, observed, plain_equal,
                           requiring, tensors_close, text)
from grader.checks.devices import device_check, placement_call
from grader.sandbox import ProbeCall

PROBES = "coursekit.probes.transformer"
F32 = {"atol": 2e-5, "rtol": 1e-4}   # float32 through a few layers, submission vs reference
F64 = {"atol": 1e-10, "rtol": 1e-9}

# The copy task: shorter than the public one (up to 150 steps of sequences of 6, not 200 of 8), stopped once
# both thresholds hold at two checks in a row (stop_when). Over 20 seeds the reference meets them (probabilities
# fed to the loss stay near 1.8, an inverted source mask copies nothing): bench/copy_task_reliability.py --hidden.
COPY = {"seed": 7, "steps": 150, "length": 6, "batch": 32}
MAX_FINAL_LOSS = 0.3
MIN_EXACT_MATCH = 0.5
_FIGURE_SOURCE = [3, 4, 5, 6, 7, 8]  # public (the README's picture shows it): the figure's input


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _config(gen: torch.Generator, *, square: bool = False, dropout: float = 0.1) -> dict:
    """A small random config: 1-4 heads, 1-2 layers per stack, vocabularies of
    different sizes (swapped embeddings show), pad_idx anywhere (not only 0).
    ``square``: d_model a perfect square, so that sqrt(d_model) is exact in
    every dtype and float64 results can be compared at 1e-10."""
    if square:
        d_model = [4, 9, 16, 36][_int(gen, 0, 3)]
        heads = [h for h in (1, 2, 3, 4) if d_model % h == 0]
        num_heads = heads[_int(gen, 0, len(heads) - 1)]
    else:
        num_heads = _int(gen, 1, 4)
        d_model = num_heads * _int(gen, 2, 6)
    src_vocab, tgt_vocab = _int(gen, 6, 14), _int(gen, 5, 12)
    return {"src_vocab": src_vocab, "tgt_vocab": tgt_vocab, "d_model": d_model, "num_heads": num_heads,
            "num_encoder_layers": _int(gen, 1, 2), "num_decoder_layers": _int(gen, 1, 2), "d_ff": _int(gen, 4, 24),
            "dropout": dropout, "max_len": 16,
            "pad_idx": _int(gen, 0, min(src_vocab, tgt_vocab) - 1)}


def _ids(gen: torch.Generator, shape: tuple[int, ...], vocab: int, pad: int) -> torch.Tensor:
    """Random token ids in [0, vocab) other than pad."""
    ids = torch.randint(0, vocab - 1, shape, generator=gen)
    return ids + (ids >= pad).long()


def _right_padded(gen: torch.Generator, ids: torch.Tensor, pad: int) -> torch.Tensor:
    """Each row keeps 1..n real tokens, then pad."""
    lengths = torch.randint(1, ids.size(1) + 1, (ids.size(0),), generator=gen)
    return ids.masked_fill(torch.arange(ids.size(1)) >= lengths[:, None], pad)


def _pair(gen: torch.Generator, config: dict, *, padded: bool, b: int | None = None) -> dict:
    """src (b, n_src) and tgt (b, n_tgt), n_src and n_tgt independent; with
    ``padded``, both right-padded, and sometimes a source pad in the middle
    too (the source mask must hide pads wherever they are)."""
    b = _int(gen, 1, 4) if b is None else b
    pad = config["pad_idx"]
    src = _ids(gen, (b, _int(gen, 1, 8)), config["src_vocab"], pad)
    tgt = _ids(gen, (b, _int(gen, 1, 8)), config["tgt_vocab"], pad)
    if padded:
        src, tgt = _right_padded(gen, src, pad), _right_padded(gen, tgt, pad)
        if src.size(1) > 2 and _int(gen, 0, 1):
            src[:, 1] = pad  # column 0 stays real
    return {"src": src, "tgt": tgt}


def _cases(probe: str, gen: torch.Generator, count: int, *, padded: bool, square: bool = False,
           dropout: float = 0.1, seeded: bool = True, **extra) -> list[ProbeCall]:
    """``count`` calls of ``probe`` on random configs and inputs; ``extra``:
    more kwargs, each made by ``f(gen, config, pair)``."""
    calls = []
    for index in range(count):
        config = _config(gen, square=square, dropout=dropout)
        # The first case has batch 1: a softmax or reduction over the wrong dim shows most there.
        pair = _pair(gen, config, padded=padded, b=1 if index == 0 else None)
        kwargs = {"config": config, **({"seed": _int(gen, 0, 10_000)} if seeded else {}), **pair}
        calls.append(ProbeCall(f"{PROBES}:{probe}", {**kwargs, **{k: f(gen, config, pair) for k, f in extra.items()}}))
    return calls


def _pad_embedding(gen: torch.Generator, config: dict, pair: dict) -> torch.Tensor:
    """Something else in the pad rows of both embeddings: real positions must not notice."""
    return torch.randn(config["d_model"], generator=gen) * 5


def _upstream(gen: torch.Generator, config: dict, pair: dict) -> torch.Tensor:
    b, n = pair["tgt"].shape
    return torch.randn(b, n, config["tgt_vocab"], generator=gen, dtype=torch.float64)


# (batch, max_len, padded source, weight seed). The seeds were picked so that,
# with the reference's weights, rows end at different steps, some never end
# and some emit pad_idx before their end symbol (tests/test_checks_transformer.py): anchored.
GREEDY_CASES = [(1, 7, False, 37), (5, 9, True, 24), (3, 2, False, 0), (6, 10, False, 21), (4, 8, True, 5)]


def greedy_case(gen: torch.Generator, b: int, max_len: int, padded: bool) -> dict:
    """A config with a small target vocabulary (the end symbol comes up
    often), start and end symbols other than pad_idx, and a source."""
    config = {**_config(gen), "tgt_vocab": _int(gen, 5, 8)}
    # Wide enough that rows differ (after a LayerNorm of width 2, every row looks alike).
    config["d_model"] = config["num_heads"] * _int(gen, 3, 6)
    config["pad_idx"] = _int(gen, 0, 3)
    symbols = [s for s in range(config["tgt_vocab"]) if s != config["pad_idx"]]
    start, end = symbols[_int(gen, 0, 1)], symbols[_int(gen, 2, len(symbols) - 1)]
    src = _ids(gen, (b, _int(gen, 2, 7)), config["src_vocab"], config["pad_idx"])
    if padded:
        src = _right_padded(gen, src, config["pad_idx"])
    return {"config": config, "src": src, "max_len": max_len, "start_symbol": start, "end_symbol": end}


def _placements(gen: torch.Generator) -> list[ProbeCall]:
    """Forward passes on the meta device, on padded batches."""
    calls = []
    for _ in range(2):
        config = _config(gen)
        pair = _pair(gen, config, padded=True)
        calls.append(placement_call("Transformer", config, pair["src"], pair["tgt"]))
    return calls


def _greedy(gen: torch.Generator) -> list[ProbeCall]:
    return [ProbeCall(f"{PROBES}:greedy_rule", {**greedy_case(gen, b, max_len, padded), "seed": seed})
            for b, max_len, padded, seed in GREEDY_CASES]


def _at(value: object, path: tuple[str, ...]) -> object:
    for key in path:
        value = value[key]  # type: ignore[index]
    return value


def _close(*path: str, atol: float, rtol: float) -> Compare:
    """``tensors_close`` that also takes a non-tensor on the expected side:
    the judge compares a failing submission with each pitfall variant's
    results too, and a variant may return None where the reference has a
    tensor (equal to a None of the submission, different from anything else)."""
    inner = tensors_close(*path, atol=atol, rtol=rtol)

    def compare(submitted: object, expected: object) -> str | None:
        try:
            mine, theirs = _at(submitted, path), _at(expected, path)
        except (KeyError, IndexError, TypeError):
            return "the result is missing a part"
        if not isinstance(theirs, torch.Tensor):
            return None if mine is None and theirs is None else "returned the wrong type"
        return inner(submitted, expected)

    return compare


def _each_close(key: str, reason: str, **tolerance: float) -> Compare:
    """Every tensor of the dict at ``key`` close to the reference's, with the
    same names; None only where the reference has None."""
    one = _close(**tolerance)

    def compare(submitted: object, expected: object) -> str | None:
        mine = submitted.get(key) if isinstance(submitted, dict) else None
        theirs = expected.get(key) if isinstance(expected, dict) else None
        if not isinstance(mine, dict) or not isinstance(theirs, dict) or set(mine) != set(theirs):
            return "different parameter names (see the sub-modules the README asks for)"
        return reason if any(one(mine[name], value) is not None for name, value in theirs.items()) else None

    return compare


def _shortfalls(loss: float, exact: float) -> list[str]:
    """The course's thresholds that a copy-task outcome misses (NaN misses both)."""
    missed = []
    if not loss <= MAX_FINAL_LOSS:
        missed.append("the training loss does not come down far enough")
    if not exact >= MIN_EXACT_MATCH:
        missed.append("after training, greedy decoding copies too few new sequences exactly")
    return missed


def _learns(submitted: object, expected: object) -> str | None:
    """Training is judged by thresholds, not by equality: a correct model's
    training drifts a little from the reference's through rounding. The
    submission must reach the thresholds that the reference reaches (the
    reference is far inside them: loss 0.02, 100% copied). When the expected
    side misses them too, it is a pitfall variant (asked whether the
    submission fails *like* it): agree only on the same shortfall at about
    the same values, so that a hint is confirmed by its own variant only."""
    try:
        loss, exact = float(submitted["final_loss"]), float(submitted["exact_match"])
        their_loss, their_exact = float(expected["final_loss"]), float(expected["exact_match"])
    except (KeyError, TypeError, ValueError):
        return "the result is missing a part"
    mine, theirs = _shortfalls(loss, exact), _shortfalls(their_loss, their_exact)
    if not mine:
        return None
    if not theirs:
        return mine[0]
    alike = mine == theirs and abs(loss - their_loss) <= 0.1 + 0.2 * their_loss and abs(exact - their_exact) <= 0.1
    return None if alike else mine[0]


def _stack_ran(side: str) -> Compare:
    """The stack's input was seen (None: neither ``model.<side>`` nor its
    first layer ran during ``model(src, tgt)``)."""

    def compare(submitted: object, expected: object) -> str | None:
        mine = submitted.get(f"{side}_input") if isinstance(submitted, dict) else None
        theirs = expected.get(f"{side}_input") if isinstance(expected, dict) else None
        if mine is None and theirs is not None:
            return (f"model.{side} never ran during model(src, tgt) (neither the stack itself nor its first "
                    f"layer, model.{side}.layers[0])")
        return None

    return compare


def _forward_ok(*extra: Compare) -> Compare:
    return all_of(_close("logits", **F32), plain_equal("repeatable", reason="eval mode is not deterministic"),
                  plain_equal("inputs_unchanged", reason="modified its input"), *extra)


CHECKS = [
    Check(
        id="11-forward-logits",
        weight=3,
        message=text("model(src, tgt) returns the right logits for random configs and shapes (batch 1, n_src != n_tgt)",
                     "在随机配置和形状（batch 为 1、n_src != n_tgt）下，model(src, tgt) 返回正确的 logits"),
        calls=lambda gen: _cases("real_target_logits", gen, 8, padded=False),
        compare=_forward_ok(),
        pitfalls=("softmax-before-loss", "embed-not-scaled", "pe-added-twice", "mask-off-by-one", "mask-inverted"),
    ),
    Check(
        id="11-padding",
        weight=2.5,
        message=text("padded sources and targets (pad_idx not always 0): the logits of real target tokens ignore "
                     "padding, whatever the embedding of pad_idx holds",
                     "源序列和目标序列带填充（pad_idx 不一定为 0）：真实目标位置的 logits 不受填充影响，"
                     "无论 pad_idx 的嵌入是什么"),
        calls=lambda gen: _cases("real_target_logits", gen, 6, padded=True, pad_embedding=_pad_embedding),
        compare=_forward_ok(),
        pitfalls=("mask-inverted", "mask-not-passed"),
        seed=1,
    ),
    Check(
        id="11-encode-decode",
        weight=1.5,
        message=text("encode(src), decode(tgt, memory, src) and forward == generator(decode(...)) on padded batches",
                     "在带填充的批次上检查 encode(src)、decode(tgt, memory, src)，以及 forward == generator(decode(...))"),
        calls=lambda gen: _cases("real_encode_decode", gen, 4, padded=True),
        compare=all_of(*(_close(key, **F32) for key in ("memory", "decoded", "generated", "logits"))),
        pitfalls=("softmax-before-loss", "embed-not-scaled", "pe-added-twice"),
        seed=2,
    ),
    Check(
        id="11-embedding-input",
        weight=2,
        message=text("what goes into the encoder and the decoder: embedding * sqrt(d_model) plus the positional "
                     "encoding, added once",
                     "编码器和解码器的输入：嵌入乘以 sqrt(d_model) 再加上位置编码（只加一次）"),
        calls=lambda gen: _cases("stack_inputs", gen, 5, padded=False),
        compare=all_of(_stack_ran("encoder"), _stack_ran("decoder"),
                       _close("encoder_input", **F32), _close("decoder_input", **F32)),
        pitfalls=("embed-not-scaled", "pe-added-twice"),
        seed=3,
    ),
    Check(
        id="11-attention-masks",
        weight=2,
        message=text("the masks built inside the model: real tokens give no attention to padded sources (encoder and "
                     "cross-attention) nor to future targets, and each target token sees itself",
                     "模型内部构造的掩码：真实 token 不关注源序列的填充位置（编码器与交叉注意力），"
                     "也不关注未来的目标位置，且每个目标 token 能看到自己"),
        calls=lambda gen: _cases("real_attention_weights", gen, 4, padded=True),
        compare=all_of(*(_close(key, **F32) for key in ("encoder_self", "decoder_self", "decoder_cross"))),
        pitfalls=("mask-off-by-one", "mask-inverted", "mask-not-passed"),
        seed=4,
    ),
    Check(
        id="11-greedy-decode",
        weight=2.5,
        message=text("greedy_decode: shape, dtype, start symbol, each token the argmax of your own forward on its "
                     "prefix, pad_idx after the end symbol (batch 1 included)",
                     "greedy_decode：形状、dtype、起始符号；每个 token 是模型自身 forward 在其前缀上的 argmax；"
                     "结束符号之后为 pad_idx（含 batch 为 1）"),
        calls=_greedy, anchored=True,  # each submission's draws, then GREEDY_CASES as picked
        compare=all_of(plain_equal("shape", reason="wrong shape"), plain_equal("dtype", reason="wrong dtype"),
                       plain_equal("starts", reason="column 0 is not start_symbol"),
                       plain_equal("follows_argmax", reason="a token is not the argmax of the logits, "
                                   "or not pad_idx after end_symbol")),
        pitfalls=("softmax-implicit-dim",),
        seed=5,
    ),
    Check(
        id="11-train-mode-gradients",
        weight=1.5,
        message=text("train mode, float64: the logits and the gradient of every parameter",
                     "训练模式、float64：logits 以及每个参数的梯度"),
        calls=lambda gen: _cases("train_gradients", gen, 3, padded=True, square=True, dropout=0.0, upstream=_upstream),
        compare=all_of(_close("logits", **F64), _each_close("grads", "wrong gradients", atol=1e-9, rtol=1e-7)),
        pitfalls=("plain-list-layers",),
        seed=6,
    ),
    Check(
        id="11-dropout-modes",
        weight=0.5,
        message=text("dropout acts in train mode only (train-mode outputs vary from one random seed to the next, "
                     "eval-mode outputs do not), including the positional encoding's dropout",
                     "dropout 只在训练模式下起作用（训练模式的输出随随机种子变化，评估模式的输出不变），"
                     "包括位置编码自带的 dropout"),
        calls=lambda gen: _cases("dropout_modes", gen, 2, padded=True, dropout=0.5),
        compare=all_of(plain_equal("train_varies", reason="dropout is not applied in train mode"),
                       plain_equal("eval_repeatable", reason="dropout is applied in eval mode"),
                       plain_equal("pe_dropout_used", reason="the positional encoding's dropout is not used")),
        pitfalls=("plain-list-layers",),
        seed=11,
    ),
    Check(
        id="11-float64",
        weight=1,
        message=text("after model.to(torch.float64) every floating tensor is float64 and the logits keep full "
                     "precision",
                     "model.to(torch.float64) 之后所有浮点张量都是 float64，logits 保持完整精度"),
        calls=lambda gen: _cases("float64_logits", gen, 3, padded=True, square=True),
        compare=all_of(plain_equal("not_moved", reason="some tensors stay float32 after .to(torch.float64)"),
                       plain_equal("dtype", reason="wrong dtype"), _close("logits", **F64)),
        pitfalls=("plain-list-layers",),
        seed=7,
    ),
    device_check("11-device", _placements, owner="model(src, tgt)", pitfalls=("mask-cpu-loop", "plain-list-layers"),
                 weight=1.5, seed=8),
    Check(
        id="11-structure",
        weight=1.5,
        message=text("the six named sub-modules with their types, every parameter registered (no plain Python "
                     "lists), and the number of parameters the config implies",
                     "六个指定名称的子模块及其类型、所有参数均已注册（不用普通 Python 列表），参数数量与配置相符"),
        calls=lambda gen: [ProbeCall(f"{PROBES}:structure_summary", {"config": _config(gen)}) for _ in range(2)],
        compare=all_of(plain_equal("hidden_lists", reason="sub-modules kept in a plain Python list"),
                       plain_equal("children", reason="missing sub-modules, or of the wrong type"),
                       plain_equal("parameters", reason="parameters missing, extra, or of the wrong shape"),
                       plain_equal("n_parameters_ok", reason="wrong number of parameters")),
        pitfalls=("plain-list-layers",),
        seed=9,
    ),
    Check(
        id="11-copy-task",
        weight=3,
        message=text("a tiny Transformer learns to copy its input (training loss, then greedy decoding of new "
                     "sequences)",
                     "一个小型 Transformer 学会复制输入（训练损失，以及训练后对新序列的贪心解码）"),
        # figure_source: the copy-cross-attention figure's picture, from this same training.
        calls=lambda gen: [ProbeCall("coursekit.probes.copy_task:copy_outcome",
                                     dict(COPY, figure_source=_FIGURE_SOURCE,
                                          stop_when=[MAX_FINAL_LOSS, MIN_EXACT_MATCH]))],
        compare=_learns,
        pitfalls=("softmax-before-loss", "softmax-implicit-dim"),
        seed=10, fixed_inputs=True,  # thresholds, on the public copy task's data (SECURITY.md)
    ),
    no_forbidden_calls("11", requires=("11-forward-logits",), kernels=(ATTENTION_LAYER,)),
]

# No working forward, no points for decoding, training, devices, dropout or structure (code that is no
# Transformer gets those right by copying by position).
CHECKS = requiring(CHECKS, {
    "11-greedy-decode": ("11-forward-logits",),
    "11-dropout-modes": ("11-forward-logits",),
    "11-device": ("11-forward-logits",),
    "11-structure": ("11-forward-logits",),
    "11-copy-task": ("11-forward-logits",)})
# Every call but the copy task's training recorded: PyTorch's attention layers cost the points (issue 36).
CHECKS = [c if c.id in ("11-copy-task", "11-no-forbidden-calls") else observed(c, (ATTENTION_LAYER,)) for c in CHECKS]

# The copy model after 11-copy-task's own training: its cross-attention on _FIGURE_SOURCE beside the
# reference's (a diagonal when it copies). Never scored; the README shows it too.
FIGURES = [
    Figure(
        name="copy-cross-attention",
        title=text("after training on the copy task: the decoder's cross-attention on the source 3 4 5 6 7 8, "
                   "mean of the heads (rows: the decoder's input, columns: the source); copying reads along "
                   "the diagonal",
                   "复制任务训练之后：解码器在源序列 3 4 5 6 7 8 上的交叉注意力，各头平均（行：解码器的输入，"
                   "列：源序列）；复制时沿对角线读取"),
        check="11-copy-task",  # its copy_outcome returns the map too: no second training
        path=("cross_attention",),
        axes=(("<s>", *map(str, _FIGURE_SOURCE)), tuple(map(str, _FIGURE_SOURCE))),
    ),
]
