"""The device check that exercises 05, 06 and 08-11 share: a forward pass
on PyTorch's meta device (see :mod:`coursekit.probes.placement`), where a
tensor that ``forward`` creates on the CPU fails as it would on a GPU."""
from __future__ import annotations

from grader.checks import CallBuilder, Check, text
from grader.sandbox import ProbeCall

PROBE = "coursekit.probes.placement:forward_placement"
MISMATCH = ("a tensor is created on another device than the inputs' (create masks and constants with "
            "device=x.device, or keep them in registered buffers)")
# "unchecked": the meta run could not judge (.item(), a data-dependent
# shape); a GPU can run such code, so it counts as placed correctly.
_FINE = {"ok", "unchecked"}


def placement_agrees(submitted: object, expected: object) -> str | None:
    """Both runs placed their tensors alike ("ok" and "unchecked" alike) and
    returned the same shape on the CPU."""
    mine, theirs = _get(submitted, "placement"), _get(expected, "placement")
    if mine != theirs and not {mine, theirs} <= _FINE:
        return MISMATCH if mine == "mismatch" else "the forward pass on another device failed"
    # Two mismatches (a submission and a pitfall variant) agree only when the
    # same tensors were left behind by .to(): a mask kept as a plain attribute
    # is another mistake than a mask made on the CPU in forward.
    if mine == "mismatch" and _get(submitted, "left_behind") != _get(expected, "left_behind"):
        return MISMATCH
    return None if _get(submitted, "shape") == _get(expected, "shape") else "wrong shape"


def _get(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, dict) else None


def device_check(check_id: str, calls: CallBuilder, *, owner: str, pitfalls: tuple[str, ...],
                 weight: float = 1.0, seed: int = 0) -> Check:
    """A check that ``owner`` (e.g. "MultiHeadAttention") runs with every
    tensor on the inputs' device."""
    return Check(
        id=check_id, weight=weight, seed=seed, calls=calls, compare=placement_agrees, pitfalls=pitfalls,
        message=text(f"{owner} creates every mask and constant of its forward pass on the inputs' device "
                     "(run on PyTorch's meta device, which stands in for a GPU)",
                     f"{owner} 在前向计算中创建的所有掩码和常量都位于输入所在的设备上"
                     "（在 PyTorch 的 meta 设备上运行，代替 GPU）"),
    )


def placement_call(cls: str, config: dict, *args: object, init_args: tuple = ()) -> ProbeCall:
    """A call of the placement probe: ``cls(*init_args, **config)(*args)``."""
    return ProbeCall(PROBE, {"cls": cls, "config": config, "args": list(args), "init_args": list(init_args)})
