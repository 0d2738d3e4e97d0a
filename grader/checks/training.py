"""Hidden checks of exercise 13 (a training loop, and sampling).

The models are the probes' own (:class:`coursekit.probes.training.ProbeLM`,
:class:`coursekit.probes.sampling.ScriptedLM`), tiny and seeded. Points rest
on what the submission returns, compared here with the reference's on
inputs the grader chose (issue 36): get_batch's facts are computed in this
process from its tensors; train_step and train are judged on the
parameters they end with (batches and dropout's masks seeded); generate on
its tokens, watched and unwatched. What the models record in the child
(modes, gradient recording, window lengths) and what the sampling watch
sees at the dispatcher may only take points away: a student can rewrite
them. Training inside a check is a few SGD steps, or 60 Adam steps of a
model with a few hundred parameters.
"""
from __future__ import annotations

import torch

from grader.checks import (Check, all_of, deep_close, error_type_equal, plain_equal, tensor_dicts_close, tensors_close,
                           text)
from coursekit.probes.training import batch_facts
from grader.sandbox import ProbeCall

TRAINING = "coursekit.probes.training"
SAMPLING = "coursekit.probes.sampling"
F64 = {"atol": 1e-9, "rtol": 1e-7}


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _model(gen: torch.Generator, **extra) -> dict:
    return {"vocab_size": _int(gen, 5, 12), "context_length": _int(gen, 3, 8), "d_model": _int(gen, 4, 9), **extra}


def _batches(gen: torch.Generator, config: dict, count: int) -> list:
    b, n = _int(gen, 1, 4), config["context_length"]
    return [[torch.randint(0, config["vocab_size"], (b, n), generator=gen) for _ in range(2)] for _ in range(count)]


def _batch_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        context_length = _int(gen, 2, 9)
        length = context_length + _int(gen, 3, 12)
        calls.append(ProbeCall(f"{TRAINING}:batches", {
            "length": length, "batch_size": _int(gen, 16, 48), "context_length": context_length,
            "draws": 40, "seed": _int(gen, 0, 10_000)}))
    return calls


def _loss_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(3):
        config = _model(gen)
        (x, y), = _batches(gen, config, 1)
        calls.append(ProbeCall(f"{TRAINING}:loss", {"config": config, "seed": _int(gen, 0, 10_000), "x": x, "y": y}))
    return calls


def _step_calls(gen: torch.Generator, *, clip: bool) -> list[ProbeCall]:
    calls = []
    for _ in range(2):
        # Clipping: logits times 1000 make a gradient far above the limit.
        config = _model(gen, scale=1000.0) if clip else _model(gen)
        grad_clip = 0.1 + 0.8 * float(torch.rand(1, generator=gen)) if clip else 1e6
        calls.append(ProbeCall(f"{TRAINING}:steps", {
            "config": config, "seed": _int(gen, 0, 10_000), "batches": _batches(gen, config, 1 if clip else 3),
            "lr": 1.0 if clip else 0.3, "grad_clip": grad_clip}))
    return calls


def _mode_calls(gen: torch.Generator) -> list[ProbeCall]:
    config = _model(gen, dropout=0.2)
    return [ProbeCall(f"{TRAINING}:steps", {"config": config, "seed": _int(gen, 0, 10_000),
                                            "batches": _batches(gen, config, 2), "lr": 0.1, "grad_clip": 1.0})]


def _estimate_calls(gen: torch.Generator) -> list[ProbeCall]:
    calls = []
    for _ in range(2):
        config = _model(gen, dropout=0.5)
        calls.append(ProbeCall(f"{TRAINING}:estimate", {"config": config, "seed": _int(gen, 0, 10_000),
                                                        "batches": _batches(gen, config, _int(gen, 2, 5))}))
    return calls


def _loop_calls(gen: torch.Generator) -> list[ProbeCall]:
    config = {"vocab_size": _int(gen, 5, 8), "context_length": _int(gen, 3, 6), "d_model": 8, "dropout": 0.1}
    steps, eval_every = _int(gen, 50, 70), _int(gen, 15, 30)
    if steps % eval_every == 0:  # the last step is never an evaluation step already (as in the public test)
        steps += 1
    return [ProbeCall(f"{TRAINING}:loop", {"config": config, "seed": _int(gen, 0, 10_000), "steps": steps,
                                           "batch_size": _int(gen, 4, 10), "eval_every": eval_every,
                                           "eval_batches": _int(gen, 2, 4)})]


def _sample_calls(gen: torch.Generator, kind: str, dropout: float = 0.0) -> list[ProbeCall]:
    calls = []
    for index in range(3):
        vocab, context = _int(gen, 5, 12), _int(gen, 4, 9)
        n = _int(gen, 1, context - 1)
        new = _int(gen, 2, 5)
        temperature, top_k = 1.0, None
        if kind == "temperature":
            temperature = (0.5, 1.7, 0.8)[index]
        elif kind == "top-k":
            temperature, top_k = 0.9, (1, _int(gen, 2, vocab - 2), vocab - 1)[index]
        else:  # the context: prompt and new tokens together run past it
            n, new = _int(gen, 1, context), context + _int(gen, 1, 4)
        idx = torch.randint(0, vocab, (_int(gen, 1, 3), n), generator=gen)
        calls.append(ProbeCall(f"{SAMPLING}:sample", {
            "vocab_size": vocab, "context_length": context, "seed": _int(gen, 0, 10_000), "idx": idx,
            "max_new_tokens": new, "temperature": temperature, "top_k": top_k, "dropout": dropout}))
    return calls


def _batches_ok(submitted: object, expected: object) -> str | None:
    """The facts of both results' pairs (grader-side) equal, one reason per fact."""
    same = all_of(plain_equal("shapes", reason="wrong shapes"), plain_equal("dtypes", reason="wrong dtypes"),
                  plain_equal("x_windows", reason="x is not a window of the data"),
                  plain_equal("y_next", reason="y is not the window one token later"),
                  plain_equal("starts_in_range", reason="a start out of range"),
                  plain_equal("every_start_drawn", reason="some start is never drawn"))
    sizes = {"data": expected["data"], "batch_size": expected["batch_size"],
             "context_length": expected["context_length"]}   # the reference's: the submission's may lie
    return same(batch_facts(submitted["pairs"], **sizes), batch_facts(expected["pairs"], **sizes))


def _trained_weights(submitted: object, expected: object) -> str | None:
    reason = tensor_dicts_close("parameters", atol=1e-7, rtol=1e-6)(submitted, expected)
    return reason and "the weights after training are not those of the optimiser's steps on the batches"


def _sample_ok() -> object:
    # "free": the same call unobserved (no dispatch mode, real draws under
    # seeded generators), compared with the reference's tokens: what the
    # watched call shows is also what happens when nobody watches.
    return all_of(plain_equal("draws", reason="not one torch.multinomial call per new token"),
                  tensors_close("probs", atol=1e-5, rtol=1e-4, check_dtype=False),
                  tensors_close("out"),
                  plain_equal("idx_unchanged", reason="modified its input"),
                  _unmodified("idx_after"),
                  _unwatched_tokens)


def _unmodified(key: str):
    """The inputs as they were after the call equal the reference's (which
    leaves them alone): judged here on the tensors, not on the child's word."""
    same = deep_close(atol=0, rtol=0)
    return lambda submitted, expected: same(submitted[key], expected[key]) and "modified its input"


def _unwatched_tokens(submitted: object, expected: object) -> str | None:
    return tensors_close("free")(submitted, expected) and "other tokens when run without the grader's recording"


def _once_each():
    """The forward passes, counted before their modes are: a loss
    recomputed after the step runs the model twice per batch, in the right
    mode, and is told so rather than that a pass ran in the wrong mode."""
    def compare(submitted: object, expected: object) -> str | None:
        mine, theirs = (value.get("training") if isinstance(value, dict) else None for value in (submitted, expected))
        if isinstance(mine, list) and isinstance(theirs, list) and len(mine) != len(theirs):
            return "ran the model another number of times than one forward pass per batch or token"
        return None
    return compare


CHECKS = [
    Check(
        id="13-get-batch",
        weight=2,
        message=text("get_batch: windows of the data at random starts (every start possible), targets one token "
                     "later, shapes (batch_size, context_length), torch.long",
                     "get_batch：在随机起点截取的数据窗口（每个起点都可能被抽到），目标向后错开一个 token，"
                     "形状 (batch_size, context_length)，类型 torch.long"),
        calls=_batch_calls,
        # One reason per fact: a failure's kind names what went wrong, and
        # only a variant that goes wrong the same way is offered as a hint.
        # The facts are drawn here from the returned tensors (batch_facts).
        compare=_batches_ok,
        pitfalls=("targets-not-shifted",),
    ),
    Check(
        id="13-loss",
        weight=1.5,
        message=text("compute_loss: the mean cross-entropy over every position (flattened logits and targets), "
                     "a scalar with its graph",
                     "compute_loss：所有位置上交叉熵的平均值（logits 与目标展平后计算），是带计算图的标量"),
        calls=_loss_calls,
        compare=all_of(plain_equal("scalar", reason="not a scalar tensor"), tensors_close("loss", **F64),
                       deep_close(atol=1e-9, rtol=1e-7, ignore=("loss", "scalar", "is_ce_of_y", "is_ce_of_x"))),
        seed=1,
    ),
    Check(
        id="13-train-step",
        weight=3,
        message=text("train_step: one SGD step per batch from that batch's gradient alone; the loss returned is "
                     "the one before the step, a Python float",
                     "train_step：每个批次只用该批次自己的梯度走一步 SGD；返回更新之前的损失，类型为 Python float"),
        calls=lambda gen: _step_calls(gen, clip=False),
        compare=all_of(deep_close(atol=1e-9, rtol=1e-7, ignore=("losses", "training", "grad")),
                       tensors_close("losses", **F64), plain_equal("floats", reason="the loss is not a Python float")),
        pitfalls=("zero-grad-forgotten",),
        seed=2,
    ),
    Check(
        id="13-clipping",
        weight=2,
        message=text("train_step clips the gradient's total norm to grad_clip (after backward, before the step)",
                     "train_step 把梯度的总范数裁剪到 grad_clip（在 backward 之后、step 之前）"),
        calls=lambda gen: _step_calls(gen, clip=True),
        compare=deep_close(atol=1e-9, rtol=1e-7, ignore=("losses", "training", "grad", "floats")),
        requires=("13-train-step",),
        seed=3,
    ),
    Check(
        id="13-train-mode",
        weight=1.5,
        message=text("train_step runs the model in training mode, whatever mode it was left in",
                     "无论模型之前处于什么模式，train_step 都在训练模式下运行模型"),
        calls=_mode_calls,
        # The parameters after steps with dropout (masks seeded alike) are
        # the evidence; the model's records may only take points away.
        compare=all_of(_once_each(), plain_equal("training", reason="a forward pass of train_step ran in eval mode"),
                       plain_equal("grad", reason="a forward pass of train_step ran without gradients"),
                       deep_close(atol=1e-9, rtol=1e-7, ignore=("training", "grad", "floats"))),
        pitfalls=("train-mode-missing",),
        requires=("13-train-step",),
        seed=4,
    ),
    Check(
        id="13-estimate",
        weight=2,
        message=text("estimate_loss: the mean loss over the batches, in eval mode and without gradients, "
                     "whatever mode the model was left in",
                     "estimate_loss：各批次损失的平均值，在评估模式下且不计算梯度，无论模型之前处于什么模式"),
        calls=_estimate_calls,
        compare=all_of(_once_each(), plain_equal("training", reason="a forward pass ran in training mode"),
                       plain_equal("grad", reason="a forward pass recorded gradients"),
                       tensors_close("loss", **F64)),
        pitfalls=("eval-mode-missing",),
        seed=5,
    ),
    Check(
        id="13-train-loop",
        weight=2,
        message=text("train: one step per batch of (batch_size, context_length), a loss per step, the held-out "
                     "loss after every eval_every steps and after the last, training then evaluation in their "
                     "modes; a small model learns a periodic text",
                     "train：每步一个 (batch_size, context_length) 的批次，每步记录一个损失；每 eval_every 步和"
                     "最后一步之后计算验证集损失；训练与评估各在其模式下进行；小模型能学会一段周期性文本"),
        calls=_loop_calls,
        compare=all_of(plain_equal("n_train", reason="not one training loss per step"),
                       plain_equal("train_floats", reason="training losses are not Python floats"),
                       plain_equal("val_steps", reason="held-out losses after the wrong steps"),
                       plain_equal("shapes", reason="batches of the wrong shape"),
                       plain_equal("modes", reason="forward passes in the wrong mode"),
                       plain_equal("learned", reason="the held-out loss did not fall"),
                       # The evidence: the weights it ends with are those of
                       # the contract's optimiser steps on the seeded batches.
                       _trained_weights),
        pitfalls=("train-mode-missing", "eval-mode-missing", "zero-grad-forgotten"),
        seed=6,
    ),
    Check(
        id="13-temperature",
        weight=2,
        message=text("generate: each token drawn with torch.multinomial from softmax(last logits / temperature)",
                     "generate：每个 token 都用 torch.multinomial 从 softmax(最后位置的 logits / temperature) 中采样"),
        calls=lambda gen: _sample_calls(gen, "temperature"),
        compare=_sample_ok(),
        pitfalls=("temperature-ignored",),
        seed=7,
    ),
    Check(
        id="13-temperature-domain",
        weight=0.5,
        message=text("generate raises ValueError for a temperature that is not positive (T -> 0 is argmax, "
                     "not T = 0)",
                     "temperature 不为正时 generate 抛出 ValueError（T → 0 的极限是 argmax，而不是 T = 0）"),
        calls=lambda gen: [ProbeCall(f"{SAMPLING}:refused_temperature", {**call.kwargs, "temperature": t})
                           for call, t in zip(_sample_calls(gen, "temperature"), (0.0, -0.5, 0.0))],
        compare=error_type_equal(),
        requires=("13-temperature",),
        seed=12,
    ),
    Check(
        id="13-top-k",
        weight=2,
        message=text("generate with top_k: exactly the k largest logits keep a probability, the others get "
                     "exactly 0 (-inf before the softmax)",
                     "带 top_k 的 generate：恰好保留最大的 k 个 logits 的概率，其余概率恰为 0（softmax 之前设为 -inf）"),
        calls=lambda gen: _sample_calls(gen, "top-k"),
        compare=_sample_ok(),
        pitfalls=("top-k-keeps-k-plus-one", "top-k-mask-zero"),
        requires=("13-temperature",),
        seed=8,
    ),
    Check(
        id="13-context",
        weight=2,
        message=text("generate past the context: the model is fed the last context_length tokens at each step",
                     "生成超出上下文长度时：每一步只把最后 context_length 个 token 送入模型"),
        calls=lambda gen: _sample_calls(gen, "context"),
        compare=all_of(plain_equal("lengths", reason="fed the model windows of the wrong length"), _sample_ok()),
        pitfalls=("context-not-cropped",),
        requires=("13-temperature",),
        seed=9,
    ),
    Check(
        id="13-generate-modes",
        weight=1,
        message=text("generate runs the model in eval mode and without gradients",
                     "generate 在评估模式下、不计算梯度地运行模型"),
        # Dropout 0.5 in the model: generating in training mode drops logits,
        # which shows in the tokens (watched and unwatched), not only in what
        # the model records (which may only take points away).
        calls=lambda gen: _sample_calls(gen, "temperature", dropout=0.5)[:1],
        compare=all_of(_once_each(), plain_equal("training", reason="the model generated in training mode"),
                       plain_equal("grad", reason="generation recorded gradients"),
                       tensors_close("out"), _unwatched_tokens),
        requires=("13-temperature",),
        seed=10,
    ),
]
