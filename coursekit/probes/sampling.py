"""Probes for exercise 13's ``generate``: what the model is fed, and the
probabilities handed to ``torch.multinomial``.

The model is :class:`ScriptedLM`, the probe's own: its logits are a fixed
function of the whole window it is given (so a window cropped at the wrong
end gives other logits) and it records each forward pass. Sampling is
watched at PyTorch's dispatcher: :class:`SamplingWatch` sees every
``aten::multinomial`` (``torch.multinomial``, ``torch.distributions.Categorical``,
``Tensor.multinomial``), records its probabilities, normalised, and answers
with the token at a fixed quantile of them instead of a random one. So a
submission and the reference draw the same tokens whatever random-number
calls they make, and a wrong distribution shows as itself, at every step.
"""
from __future__ import annotations

from types import ModuleType

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

_MULTINOMIAL = torch.ops.aten.multinomial
_MODE_BASE = TorchDispatchMode  # bound before any student module is imported


class ScriptedLM(nn.Module):
    """Logits ``(b, n, vocab_size)``: at position t, ``scale`` times row
    ``idx[t]`` of one table plus row ``(idx[0] + ... + idx[t]) % vocab_size``
    of another (the running sum makes the logits depend on where the window
    starts). Records ``{"length", "training", "grad"}`` per forward pass."""

    def __init__(self, vocab_size: int, context_length: int, seed: int, scale: float = 2.0,
                 dropout: float = 0.0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.context_length = context_length
        self.vocab_size = vocab_size
        self.current = nn.Parameter(scale * torch.randn(vocab_size, vocab_size, generator=gen))
        self.history = nn.Parameter(scale * torch.randn(vocab_size, vocab_size, generator=gen))
        # Its mode is what the model records; with dropout > 0 the mode also
        # shows in the logits (training mode drops some), so in the tokens.
        self.drop = nn.Dropout(dropout)
        self.seen: list[dict] = []

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.seen.append({"length": int(idx.size(1)), "training": bool(self.drop.training),
                          "grad": torch.is_grad_enabled()})
        running = torch.cumsum(idx, dim=1) % self.vocab_size
        return self.drop(self.current[idx] + self.history[running])


class SamplingWatch(_MODE_BASE):
    """Answers ``aten::multinomial`` with the token at quantile ``quantiles[i]``
    of the i-th call's (normalised) probabilities, one token per row, and
    records those probabilities."""

    def __init__(self, quantiles: list[float]) -> None:
        super().__init__()
        self.quantiles = quantiles
        self.probs: list[torch.Tensor] = []

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch._dynamo import on first use (see dispatch._Recorder)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is not _MULTINOMIAL:
            return func(*args, **(kwargs or {}))
        weights = args[0].detach().to(torch.float64)
        rows = weights.reshape(-1, weights.size(-1))
        probs = rows / rows.sum(-1, keepdim=True)
        self.probs.append(probs.clone())
        u = self.quantiles[(len(self.probs) - 1) % len(self.quantiles)]
        # The first token whose cumulative probability reaches u: never one of probability 0.
        token = (probs.cumsum(-1) < u).sum(-1).clamp(max=probs.size(-1) - 1)
        num_samples = args[1] if len(args) > 1 else (kwargs or {}).get("num_samples", 1)
        return token[:, None].expand(-1, num_samples).reshape(*weights.shape[:-1], num_samples).clone()


def unobserved(module: ModuleType, vocab_size: int, context_length: int, seed: int, idx: torch.Tensor,
               max_new_tokens: int, temperature: float, top_k: int | None, dropout: float = 0.0) -> torch.Tensor | None:
    """``generate`` as a student runs it: no dispatch mode on the stack,
    nothing recorded, real random draws. The generator and PyTorch's global
    one are seeded alike, so every correct ``generate`` (the generator, or
    ``torch.distributions.Categorical``, which draws from the global one)
    returns the reference's tokens: the grader compares them, and a
    ``generate`` that samples correctly only while watched loses here."""
    model = ScriptedLM(vocab_size, context_length, seed, dropout=dropout).train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = module.generate(model, idx.clone(), max_new_tokens, temperature=temperature, top_k=top_k,
                              generator=torch.Generator().manual_seed(seed))
    return out.detach().clone() if isinstance(out, torch.Tensor) else None


def sample(module: ModuleType, vocab_size: int, context_length: int, seed: int, idx: torch.Tensor,
           max_new_tokens: int, temperature: float, top_k: int | None, dropout: float = 0.0) -> dict:
    """``generate`` on a :class:`ScriptedLM` left in training mode, under
    :class:`SamplingWatch`: the tokens returned, the probabilities of each
    draw (rows of all draws, in order), the window lengths fed to the
    model, the modes and gradient recording of its forward passes, and
    whether ``idx`` came back unchanged; and, first, the tokens of the same
    call unobserved (:func:`unobserved`, ``"free"``)."""
    free = unobserved(module, vocab_size, context_length, seed, idx, max_new_tokens, temperature, top_k, dropout)
    model = ScriptedLM(vocab_size, context_length, seed, dropout=dropout).train()
    quantiles = torch.rand(97, generator=torch.Generator().manual_seed(seed + 1)).mul(0.9).add(0.05).tolist()
    watch = SamplingWatch(quantiles)
    before = idx.clone()
    with watch:
        out = module.generate(model, idx, max_new_tokens, temperature=temperature, top_k=top_k,
                              generator=torch.Generator().manual_seed(seed))
    probs = torch.cat(watch.probs) if watch.probs else torch.zeros(0, vocab_size, dtype=torch.float64)
    return {"free": free, "out": out.detach() if isinstance(out, torch.Tensor) else None, "probs": probs,
            "draws": len(watch.probs), "lengths": [s["length"] for s in model.seen],
            "training": sorted({s["training"] for s in model.seen}), "grad": sorted({s["grad"] for s in model.seen}),
            "idx_unchanged": bool(torch.equal(idx, before)), "idx_after": idx.clone()}


def refused_temperature(module: ModuleType, vocab_size: int, context_length: int, seed: int, idx: torch.Tensor,
                        max_new_tokens: int, temperature: float, top_k: int | None, dropout: float = 0.0) -> dict:
    """The type of the exception ``generate`` raises for a ``temperature``
    that is not positive (None when it raises none; a stub's
    NotImplementedError goes through as the stub's)."""
    model = ScriptedLM(vocab_size, context_length, seed, dropout=dropout).eval()
    try:
        module.generate(model, idx, max_new_tokens, temperature=temperature, top_k=top_k,
                        generator=torch.Generator().manual_seed(seed))
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - which exception is the result
        return {"type": type(exc).__name__}
    return {"type": None}
