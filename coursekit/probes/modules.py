"""Probes about any ``nn.Module``: what it registers, where its gradients go,
how it behaves in train and eval mode. Shared by every exercise that asks
for a module (04-06, 08-11).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Forward = Callable[[nn.Module], torch.Tensor]


def registered(module: nn.Module) -> dict:
    """Names and shapes of parameters, buffers (with dtype and whether they
    are saved) and direct sub-modules, as plain data."""
    persistent = set(module.state_dict().keys())
    return {
        "parameters": {name: list(p.shape) for name, p in module.named_parameters()},
        "buffers": {
            name: {"shape": list(b.shape), "dtype": str(b.dtype), "persistent": name in persistent}
            for name, b in module.named_buffers()
        },
        "children": {name: type(child).__name__ for name, child in module.named_children()},
        "state_dict_keys": sorted(persistent),
    }


def tensor_attributes(module: nn.Module) -> list[str]:
    """Plain tensor attributes that are neither parameters nor buffers (a
    mask kept as ``self.mask = torch.triu(...)``): ``.to()`` never moves them."""
    return sorted(
        f"{prefix}{'.' if prefix else ''}{name}"
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    )


def hidden_list_modules(module: nn.Module) -> list[str]:
    """Attributes holding a plain list or tuple of modules, which
    ``parameters()``, ``state_dict()`` and ``.to()`` never see."""
    found = []
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if isinstance(value, (list, tuple)) and any(isinstance(v, nn.Module) for v in value):
                found.append(f"{prefix}{'.' if prefix else ''}{name}")
    return sorted(found)


def load_weights(module: nn.Module, weights: dict[str, torch.Tensor]) -> dict:
    """Copy ``weights`` into ``module`` by name; report the parameter names
    that did not match instead of raising (buffers such as masks are the
    module's own business and may be left out of ``weights``)."""
    result = module.load_state_dict(weights, strict=False)
    buffers = {name for name, _ in module.named_buffers()}
    missing = [k for k in result.missing_keys if k not in buffers]
    return {"missing": sorted(missing), "unexpected": sorted(result.unexpected_keys)}


def gradient_reach(module: nn.Module, forward: Forward) -> dict[str, bool]:
    """Backpropagate ``forward(module).sum()``: which parameters got a
    non-zero gradient."""
    module.zero_grad(set_to_none=True)
    forward(module).sum().backward()
    return {
        name: p.grad is not None and bool(p.grad.abs().sum() > 0)
        for name, p in module.named_parameters()
    }


def _every_tensor(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters, buffers and plain tensor attributes, by dotted name."""
    found = dict([*module.named_parameters(), *module.named_buffers()])
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found[f"{prefix}{'.' if prefix else ''}{name}"] = value
    return found


def dtypes_after_to(module: nn.Module, dtype: torch.dtype) -> dict[str, str]:
    """``module.to(dtype)``, then the dtype of every floating parameter,
    buffer and plain tensor attribute (bool masks keep their dtype)."""
    module.to(dtype)
    return {name: str(t.dtype) for name, t in _every_tensor(module).items()}


def devices_after_to(module: nn.Module, device: str | torch.device) -> dict[str, str]:
    """``module.to(device)``, then the device of every parameter, buffer and
    plain tensor attribute. With ``device="meta"`` this shows, without a
    GPU, which tensors ``.to("cuda")`` would leave behind."""
    module.to(device)
    return {name: str(t.device) for name, t in _every_tensor(module).items()}


def train_eval_outputs(module: nn.Module, forward: Forward, seeds: tuple[int, int] = (0, 1)) -> dict:
    """Outputs in train mode under two seeds and in eval mode under two
    seeds: dropout shows as train outputs that differ, eval outputs that don't."""
    outputs = {}
    with torch.no_grad():
        for mode in ("train", "eval"):
            module.train(mode == "train")
            for seed in seeds:
                torch.manual_seed(seed)
                outputs[f"{mode}_{seed}"] = forward(module)
    module.train()
    return outputs


def attributes_before_forward(module: nn.Module, names: list[str]) -> dict[str, str]:
    """What each attribute of ``names`` holds right after the constructor,
    before any forward pass: "missing", "None", or the type's name. A
    contract attribute (``attn``: None until the first call) must exist
    from ``__init__`` on."""
    found = {}
    for name in names:
        try:
            value = getattr(module, name)
        except AttributeError:
            found[name] = "missing"
            continue
        found[name] = "None" if value is None else type(value).__name__
    return found
