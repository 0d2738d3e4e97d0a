"""SelfAttention whose layers live in a plain dict, out of nn.Module's
bookkeeping, and whose named_parameters(), parameters(), state_dict(),
load_state_dict(), children() and named_children() pretend they are
registered: it computes the right output, but .to(), optimisers that
walk the real registration, and checkpoints would not see its weights."""
from collections import OrderedDict

import torch
from torch import nn

NAMES = ("W_query", "W_key", "W_value")


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        object.__setattr__(self, "store", {name: nn.Linear(d_in, d_out, bias=qkv_bias) for name in NAMES})

    def __getattr__(self, name):
        store = object.__getattribute__(self, "__dict__").get("store", {})
        if name in store:
            return store[name]
        return super().__getattr__(name)

    def named_children(self):
        yield from self.store.items()

    def children(self):
        yield from self.store.values()

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        yield prefix, self
        for name, layer in self.store.items():
            yield f"{prefix}{'.' if prefix else ''}{name}", layer

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, layer in self.store.items():
            for pname, p in layer.named_parameters():
                yield f"{name}.{pname}", p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters():
            yield p

    def state_dict(self, *args, **kwargs):
        return OrderedDict((name, p.detach()) for name, p in self.named_parameters())

    def load_state_dict(self, state_dict, strict=True, assign=False):
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in state_dict:
                    p.copy_(state_dict[name])
        return nn.modules.module._IncompatibleKeys([], [])

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.size(-1) ** 0.5, dim=-1)
        return weights @ values
