"""Structure probes ask nn.Module, not the submission (coursekit.probes.modules):
the walkers agree with nn.Module's own methods on honest modules, a module
whose named_parameters(), state_dict() or children() lie is marked, and
gradients that reach tensors outside the registration show. Issue 13, class 6.
End to end: tests/redteam/test_real_work.py."""
from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from torch import nn

from coursekit.probes.modules import (DISAGREES, UNREGISTERED, gradient_reach, own_named_buffers,
                                      own_named_parameters, own_state_dict_keys, registered, walk_modules)


class Shared(nn.Module):
    """A layer registered under two names, a non-persistent buffer, a None child."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.again = self.first
        self.norm = nn.LayerNorm(3)
        self.register_buffer("mask", torch.ones(3, dtype=torch.bool))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)
        self.missing = None

    def forward(self, x):
        return self.norm(self.again(self.first(x)))


HONEST = {
    "shared": Shared,
    "encoder layer": lambda: nn.TransformerEncoderLayer(8, 2, 16),
    "sequential": lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2))),
}


@pytest.mark.parametrize("name", HONEST)
def test_the_walkers_agree_with_nn_module_on_honest_modules(name):
    module = HONEST[name]()
    assert [(n, id(p)) for n, p in own_named_parameters(module)] == [(n, id(p)) for n, p in module.named_parameters()]
    assert [(n, id(b)) for n, b in own_named_buffers(module)] == [(n, id(b)) for n, b in module.named_buffers()]
    assert sorted(own_state_dict_keys(module)) == sorted(module.state_dict())
    assert [n for n, _ in walk_modules(module)] == [n for n, _ in module.named_modules()]
    found = registered(module)
    assert DISAGREES not in found["parameters"] and found["state_dict_keys"] == sorted(module.state_dict())


class RenamesParameters(Shared):
    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            yield name.replace("first", "W_query"), p


class HidesAKey(Shared):
    def state_dict(self, *args, **kwargs):
        return OrderedDict((k, v) for k, v in super().state_dict(*args, **kwargs).items() if k != "mask")


class InventsAChild(Shared):
    def named_children(self):
        yield from super().named_children()
        yield "encoder", nn.Linear(3, 3)


class CannotAnswer(Shared):
    def named_parameters(self, *args, **kwargs):
        raise RuntimeError("no")


@pytest.mark.parametrize("liar", [RenamesParameters, HidesAKey, InventsAChild, CannotAnswer])
def test_a_module_that_lies_about_itself_is_marked(liar):
    found = registered(liar())
    truth = registered(Shared())
    # What it registers is shown as it is; the lie shows in every part.
    assert set(found["parameters"]) == set(truth["parameters"]) | {DISAGREES}
    assert DISAGREES in found["children"] and DISAGREES in found["state_dict_keys"]


def test_registration_is_read_past_overridden_lookups():
    class Pretends(nn.Module):
        """Its layer lives in a plain dict; its methods say it is registered."""

        def __init__(self):
            super().__init__()
            object.__setattr__(self, "store", {"W_query": nn.Linear(2, 2)})

        def named_parameters(self, *args, **kwargs):
            yield from (("W_query." + n, p) for n, p in self.store["W_query"].named_parameters())

        def named_modules(self, *args, **kwargs):
            yield "", self
            yield "W_query", self.store["W_query"]

        def state_dict(self, *args, **kwargs):
            return OrderedDict(self.named_parameters())

    found = registered(Pretends())
    assert set(found["parameters"]) == {DISAGREES} and found["children"] == {DISAGREES: DISAGREES}


class HiddenWeight(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.layer = nn.Linear(2, 2)
        weight = torch.ones(2, requires_grad=True)
        self.kind = kind
        if kind == "parameter in a list":
            self.extras = [nn.Parameter(weight)]
        elif kind == "tensor attribute":
            self.extra = weight
        elif kind == "tensor in a dict":
            self.extras = {"w": weight}

    def forward(self, x):
        out = self.layer(x)
        if self.kind == "parameter in a list":
            return out * self.extras[0]
        if self.kind == "tensor attribute":
            return out * self.extra
        if self.kind == "tensor in a dict":
            return out * self.extras["w"]
        return out


@pytest.mark.parametrize("kind", ["parameter in a list", "tensor attribute", "tensor in a dict"])
def test_gradients_that_reach_unregistered_tensors_show(kind):
    reach = gradient_reach(HiddenWeight(kind), lambda m: m(torch.ones(3, 2)))
    assert reach[UNREGISTERED] is True and reach["layer.weight"] is True


def test_inputs_and_honest_modules_give_no_mark():
    x = torch.ones(3, 2, requires_grad=True)
    reach = gradient_reach(HiddenWeight("none"), lambda m: m(x))
    assert reach == {"layer.weight": True, "layer.bias": True}
