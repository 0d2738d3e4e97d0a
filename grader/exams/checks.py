"""Hidden checks in an exam: the exercise's own checks, reseeded with the
student's variant, plus exam checks that use the variant's sizes.

How a check gets a variant (grader/checks/__init__.py): ``Check.build_calls(variant)``
seeds the generator from the variant's hidden seed, and calls
``variant_calls(generator, sizes)`` when the check has one, else its usual
``calls(generator)``. So every student's hidden inputs differ, and the checks
below also take their shapes from the student's sizes. ``VariantJudge`` is a
:class:`grader.judge.Judge` whose plan is built for one student's variant; the
grading pipeline makes one per student (its reference results are per student,
too: other inputs, other expected values).

Exam checks are declared here rather than in grader/checks/<slug>.py because
they need sizes only exams have; an exercise's own checks may also declare
``variant_calls`` and will be used the same way.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader.course import Course, Exercise
from grader.exams.variants import Variant

# The sizes each exercise's exam checks read: an exam over the exercise must
# define them (checked by grader/exams/validate.py, which runs at every
# course load: hence no torch or check machinery imported at module level).
SIZES_USED: dict[str, tuple[str, ...]] = {
    "03": ("batch", "heads", "head_dim", "d_model", "seq_len", "context_length"),
    "06": ("batch", "heads", "d_model", "seq_len", "context_length"),
}
# For calls made outside an exam (the check matrix, selftests).
DEFAULT_SIZES = {"heads": 2, "head_dim": 4, "d_model": 8, "batch": 2, "seq_len": 5, "context_length": 7}

MASKING = "coursekit.probes.masking"
MULTIHEAD = "coursekit.probes.multihead"


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    import torch

    return torch.randn(*shape, generator=gen)


def _seed(gen: torch.Generator) -> int:
    import torch

    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))


def _masking_calls(gen: torch.Generator, s: Mapping[str, Any], ProbeCall) -> dict[str, list]:
    import torch

    b, h, n, hd, ctx, d = s["batch"], s["heads"], s["seq_len"], s["head_dim"], s["context_length"], s["d_model"]
    causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    lengths = torch.randint(1, ctx + 1, (b,), generator=gen)
    padding = (torch.arange(ctx) >= lengths.unsqueeze(-1))[:, None, :]
    return {
        "masks": [ProbeCall(f"{MASKING}:causal_mask_output", {"seq_len": n}),
                  ProbeCall(f"{MASKING}:padding_mask_output", {"lengths": torch.randint(0, n + 1, (b,), generator=gen),
                                                               "seq_len": n})],
        "causal": [ProbeCall(f"{MASKING}:attention_output", {"query": _randn(gen, b, h, n, hd), "key": _randn(gen, b, h, n, hd),
                                                             "value": _randn(gen, b, h, n, hd), "mask": causal})],
        "padded": [ProbeCall(f"{MASKING}:attention_output", {"query": _randn(gen, b, n, hd), "key": _randn(gen, b, ctx, hd),
                                                             "value": _randn(gen, b, ctx, d), "mask": padding})],
    }


def _multihead_calls(gen: torch.Generator, s: Mapping[str, Any], ProbeCall, from_probe) -> dict[str, list]:
    import torch

    b, h, n, d, ctx = s["batch"], s["heads"], s["seq_len"], s["d_model"], s["context_length"]
    config = {"d_in": d, "d_out": d, "context_length": ctx, "dropout": 0.0, "num_heads": h,
              "qkv_bias": bool(torch.randint(0, 2, (1,), generator=gen))}
    weights = from_probe.random_weights("MultiHeadAttention", config, seed=_seed(gen))
    return {
        "split": [ProbeCall(f"{MULTIHEAD}:split_heads_output", {"x": _randn(gen, b, n, d), "num_heads": h}),
                  ProbeCall(f"{MULTIHEAD}:merge_heads_output", {"x": _randn(gen, b, h, n, d // h)})],
        "mha": [ProbeCall(f"{MULTIHEAD}:forward", {"class_name": "MultiHeadAttention", "config": config,
                                                   "x": _randn(gen, b, length, d), "weights": weights})
                for length in sorted({n, ctx})],
    }


def exam_checks(exercise_id: str) -> list:
    """The exam checks of an exercise (empty for exercises without any)."""
    import torch

    from coursekit.probes import multihead as multihead_probe
    from grader.checks import Check, all_of, tensors_close, text
    from grader.sandbox import ProbeCall

    def part(builder, name):
        def variant_calls(gen, sizes):
            return builder(gen, sizes)[name]
        return {"calls": lambda gen: variant_calls(gen, DEFAULT_SIZES), "variant_calls": variant_calls}

    if exercise_id == "03":
        build = lambda gen, sizes: _masking_calls(gen, sizes, ProbeCall)  # noqa: E731
        both = all_of(tensors_close("output"), tensors_close("weights"))
        return [
            Check(id="03-exam-masks", weight=1, **part(build, "masks"),
                  message=text("causal and padding masks of your exam's sizes", "你的考试尺寸下的因果掩码与 padding 掩码"),
                  compare=lambda sub, ref: (tensors_close()(sub, ref) if isinstance(ref, torch.Tensor)
                                            else tensors_close("mask")(sub, ref)),
                  pitfalls=("mask-off-by-one", "mask-inverted")),
            Check(id="03-exam-causal-heads", weight=2, **part(build, "causal"),
                  message=text("causal attention over your exam's heads and sizes", "你的考试尺寸下多头的因果注意力"),
                  compare=both, pitfalls=("missing-scale", "scale-by-d", "mask-after-softmax")),
            Check(id="03-exam-padded-keys", weight=2, **part(build, "padded"),
                  message=text("attention to padded keys, n_query != n_key, d_v != d_k, your exam's sizes",
                               "你的考试尺寸下对带 padding 的 key 的注意力（n_query != n_key，d_v != d_k）"),
                  compare=both, pitfalls=("mask-inverted", "missing-scale")),
        ]
    if exercise_id == "06":
        build = lambda gen, sizes: _multihead_calls(gen, sizes, ProbeCall, multihead_probe)  # noqa: E731
        return [
            Check(id="06-exam-split-merge", weight=1, **part(build, "split"),
                  message=text("split_heads and merge_heads with your exam's sizes", "你的考试尺寸下的 split_heads 与 merge_heads"),
                  compare=tensors_close("output"), pitfalls=("view-no-transpose", "merge-wrong-order")),
            Check(id="06-exam-multihead", weight=3, **part(build, "mha"),
                  message=text("MultiHeadAttention with your exam's sizes, full and shorter inputs",
                               "你的考试尺寸下的 MultiHeadAttention（满长度与较短输入）"),
                  compare=tensors_close("output"), pitfalls=("scale-by-d", "view-no-transpose", "no-out-proj", "mask-no-slice")),
        ]
    return []


def checks_for_exam(exercise: Exercise) -> list:
    """The exercise's own hidden checks, then its exam checks."""
    from grader.checks import checks_for

    return [*checks_for(exercise), *exam_checks(exercise.id)]


def variant_judge(course: Course, sandbox, root: Path, variant: Variant):
    """A :class:`grader.judge.Judge` for one student's variant."""
    from grader.checks import CheckPlan
    from grader.judge import Judge

    class VariantJudge(Judge):
        def plan(self, exercise: Exercise) -> CheckPlan:
            return self._once(("plan", exercise.id), lambda: CheckPlan.build(checks_for_exam(exercise), variant))

    judge = VariantJudge(course, sandbox, root)
    judge.variant = variant
    return judge
