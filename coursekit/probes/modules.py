"""Probes about any ``nn.Module``: what it registers, where its gradients go,
how it behaves in train and eval mode. Shared by every exercise that asks
for a module (04-06, 08-11).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Forward = Callable[[nn.Module], torch.Tensor]


# Shown as a parameter name (or child, or state_dict key) when a module's
# own answers disagree with what it registers: every structure check
# compares the parameters, so a module that lies about itself fails them.
DISAGREES = "(the module's named_parameters(), state_dict() or children() disagree with what it registers)"
# Shown by gradient_reach when the output's gradients reach tensors that are
# not registered parameters (weights kept outside the module's bookkeeping).
UNREGISTERED = "(the output's gradients reach tensors that are not registered parameters)"


def _own(module: nn.Module, name: str):
    """An nn.Module's own bookkeeping (``_parameters``, ``_modules``, ...),
    read from the instance dict: no method of the submission's class runs."""
    return object.__getattribute__(module, "__dict__").get(name) or {}


def walk_modules(module: nn.Module, prefix: str = "", dedupe: bool = True, seen: set[int] | None = None):
    """(dotted name, module) for ``module`` and every registered sub-module,
    in ``nn.Module.named_modules`` order, found through ``_modules`` itself:
    overriding ``named_modules``/``children`` changes nothing here."""
    seen = set() if seen is None else seen
    if dedupe and id(module) in seen:
        return
    seen.add(id(module))
    yield prefix, module
    for name, child in _own(module, "_modules").items():
        if isinstance(child, nn.Module):
            yield from walk_modules(child, f"{prefix}{'.' if prefix else ''}{name}", dedupe, seen)


def _members(module: nn.Module, table: str, dedupe: bool = True) -> list[tuple[str, torch.Tensor]]:
    found, seen = [], set()
    for prefix, sub in walk_modules(module, dedupe=dedupe):
        for name, value in _own(sub, table).items():
            if value is None or (dedupe and id(value) in seen):
                continue
            seen.add(id(value))
            found.append((f"{prefix}{'.' if prefix else ''}{name}", value))
    return found


def own_named_parameters(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """What ``nn.Module.named_parameters`` yields, without calling it."""
    return _members(module, "_parameters")


def own_named_buffers(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """What ``nn.Module.named_buffers`` yields, without calling it."""
    return _members(module, "_buffers")


def own_state_dict_keys(module: nn.Module) -> list[str]:
    """The keys ``nn.Module.state_dict`` gives, without calling it: every
    parameter and every persistent buffer, shared ones under each name."""
    keys = []
    for prefix, sub in walk_modules(module, dedupe=False):
        skip = _own(sub, "_non_persistent_buffers_set")
        dot = f"{prefix}." if prefix else ""
        keys += [dot + name for name, p in _own(sub, "_parameters").items() if p is not None]
        keys += [dot + name for name, b in _own(sub, "_buffers").items() if b is not None and name not in skip]
    return keys


def _self_report_agrees(module: nn.Module) -> bool:
    """Whether the module's own ``named_parameters()``, ``state_dict()`` and
    ``named_children()`` (the submission's overrides, if any) tell what it
    registers. Any error while asking counts as disagreeing."""
    try:
        truth_params = [(n, id(p)) for n, p in own_named_parameters(module)]
        told_params = [(n, id(p)) for n, p in module.named_parameters()]
        told_keys = sorted(module.state_dict().keys())
        children = [(n, id(c)) for n, c in _own(module, "_modules").items() if isinstance(c, nn.Module)]
        told_children = [(n, id(c)) for n, c in module.named_children()]
    except Exception:  # noqa: BLE001 - a module that cannot answer does not tell the truth
        return False
    seen, unique_children = set(), []
    for name, ident in children:  # named_children() yields a shared child once
        if ident not in seen:
            seen.add(ident)
            unique_children.append((name, ident))
    return (told_params == truth_params and told_keys == sorted(own_state_dict_keys(module))
            and told_children == unique_children)


def registered(module: nn.Module) -> dict:
    """Names and shapes of parameters, buffers (with dtype and whether they
    are saved) and direct sub-modules, as plain data: what the module
    registers (its ``_parameters``, ``_buffers``, ``_modules``), never what
    its own methods say. When those methods say otherwise, each part shows
    :data:`DISAGREES` as an extra entry, and the structure checks fail."""
    persistent = own_state_dict_keys(module)
    found = {
        "parameters": {name: list(p.shape) for name, p in own_named_parameters(module)},
        "buffers": {
            name: {"shape": list(b.shape), "dtype": str(b.dtype), "persistent": name in persistent}
            for name, b in own_named_buffers(module)
        },
        "children": {name: type(child).__name__ for name, child in _own(module, "_modules").items()
                     if isinstance(child, nn.Module)},
        "state_dict_keys": sorted(set(persistent)),
    }
    if not _self_report_agrees(module):
        found["parameters"][DISAGREES] = []
        found["children"][DISAGREES] = DISAGREES
        found["state_dict_keys"].append(DISAGREES)
    return found


def tensor_attributes(module: nn.Module) -> list[str]:
    """Plain tensor attributes that are neither parameters nor buffers (a
    mask kept as ``self.mask = torch.triu(...)``): ``.to()`` never moves them."""
    return sorted(
        f"{prefix}{'.' if prefix else ''}{name}"
        for prefix, sub in walk_modules(module)
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    )


def hidden_list_modules(module: nn.Module) -> list[str]:
    """Attributes holding a plain list or tuple of modules, which
    ``parameters()``, ``state_dict()`` and ``.to()`` never see."""
    found = []
    for prefix, sub in walk_modules(module):
        for name, value in vars(sub).items():
            if isinstance(value, (list, tuple)) and any(isinstance(v, nn.Module) for v in value):
                found.append(f"{prefix}{'.' if prefix else ''}{name}")
    return sorted(found)


def load_weights(module: nn.Module, weights: dict[str, torch.Tensor]) -> dict:
    """Copy ``weights`` into ``module`` by name; report the parameter names
    that did not match instead of raising (buffers such as masks are the
    module's own business and may be left out of ``weights``)."""
    result = module.load_state_dict(weights, strict=False)
    buffers = {name for name, _ in own_named_buffers(module)}
    missing = [k for k in result.missing_keys if k not in buffers]
    return {"missing": sorted(missing), "unexpected": sorted(result.unexpected_keys)}


def _graph_leaves(output: torch.Tensor) -> dict[int, torch.Tensor]:
    """The leaf tensors whose gradients ``output.backward()`` accumulates,
    found by walking its autograd graph (what gradients reach, whatever the
    module says it holds)."""
    leaves, stack, seen = {}, [output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves[id(variable)] = variable
        stack += [next_node for next_node, _ in node.next_functions]
    return leaves


def _attribute_tensors(module: nn.Module) -> dict[int, torch.Tensor]:
    """Tensors held in the module tree's attributes, directly or in a list,
    tuple or dict (where registration never sees them)."""
    found = {}
    for _, sub in walk_modules(module):
        for value in object.__getattribute__(sub, "__dict__").values():
            values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            found.update((id(v), v) for v in values if isinstance(v, torch.Tensor))
    return found


def gradient_reach(module: nn.Module, forward: Forward) -> dict[str, bool]:
    """Backpropagate ``forward(module).sum()``: which registered parameters
    got a non-zero gradient. When the gradients also reach tensors that are
    not registered parameters (an ``nn.Parameter`` in a plain list, a tensor
    attribute with ``requires_grad``), :data:`UNREGISTERED` is one more entry."""
    for _, p in own_named_parameters(module):
        p.grad = None
    output = forward(module).sum()
    leaves = _graph_leaves(output)
    output.backward()
    params = own_named_parameters(module)
    reach = {name: p.grad is not None and bool(p.grad.abs().sum() > 0) for name, p in params}
    registered_ids = {id(p) for _, p in params}
    held = _attribute_tensors(module)
    if any(i not in registered_ids and (isinstance(t, nn.Parameter) or i in held) for i, t in leaves.items()):
        reach[UNREGISTERED] = True
    return reach


def _every_tensor(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters, buffers and plain tensor attributes, by dotted name."""
    found = dict([*own_named_parameters(module), *own_named_buffers(module)])
    for prefix, sub in walk_modules(module):
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
