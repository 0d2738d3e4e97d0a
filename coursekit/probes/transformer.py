"""Probes for exercise 11 (the full Transformer).

Every probe builds its own model from ``module.Transformer(**config)`` and
gives it weights that depend only on ``seed`` and the parameter names of the
contract (see :func:`init_by_name`), so a submission and the reference built
with the same config and seed hold the same weights, whatever order they
create their layers in.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from coursekit.loader import load_module
from coursekit.probes.modules import hidden_list_modules, registered

IMPLICIT_SOFTMAX = "Implicit dimension choice for softmax"


def init_by_name(model: nn.Module, seed: int) -> None:
    """Fill every parameter from a generator seeded with ``seed``, visiting
    them in sorted name order: matrices Xavier-uniform, LayerNorm weights
    1 + U(-0.1, 0.1), other vectors U(-0.1, 0.1)."""
    norms = {f"{name}.weight" for name, sub in model.named_modules() if isinstance(sub, nn.LayerNorm)}
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p, generator=gen)
            else:
                p.uniform_(-0.1, 0.1, generator=gen)
                if name in norms:
                    p.add_(1.0)


def build(module: ModuleType, config: dict, seed: int = 0) -> nn.Module:
    """``module.Transformer(**config)`` with seeded weights, in eval mode."""
    model = module.Transformer(**config)
    init_by_name(model, seed)
    return model.eval()


def _implicit_softmax(caught: list) -> bool:
    return any(IMPLICIT_SOFTMAX in str(w.message) for w in caught)


def forward_logits(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor,
                   pad_embedding: torch.Tensor | None = None) -> dict:
    """``model(src, tgt)`` in eval mode; with ``pad_embedding``, the rows of
    ``src_embed`` and ``tgt_embed`` for ``pad_idx`` are overwritten first.
    Also: whether a second call gives the same logits (eval mode must be
    deterministic), whether the inputs came back unchanged, whether a
    softmax without ``dim`` was called, and the attributes that hide
    modules in plain lists."""
    model = build(module, config, seed)
    if pad_embedding is not None:
        pad = config.get("pad_idx", 0)
        with torch.no_grad():
            model.src_embed.weight[pad] = pad_embedding
            model.tgt_embed.weight[pad] = pad_embedding
    src_before, tgt_before = src.clone(), tgt.clone()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(src, tgt)
        again = model(src, tgt)
    return {
        "logits": logits,
        "repeatable": isinstance(logits, torch.Tensor) and isinstance(again, torch.Tensor) and torch.equal(logits, again),
        "inputs_unchanged": bool(torch.equal(src, src_before) and torch.equal(tgt, tgt_before)),
        "implicit_softmax": _implicit_softmax(caught),
        "hidden_lists": hidden_list_modules(model),
    }


def encode_decode(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """``encode(src)``, ``decode(tgt, memory, src)``, ``generator`` on the
    decoder output, and ``forward(src, tgt)``, in eval mode."""
    model = build(module, config, seed)
    with torch.no_grad():
        memory = model.encode(src)
        decoded = model.decode(tgt, memory, src)
        return {
            "memory": memory,
            "decoded": decoded,
            "generated": model.generator(decoded),
            "logits": model(src, tgt),
            "generator_type": type(model.generator).__name__,
        }


def _kept_weights(model: nn.Module, stack: str, attention: str) -> torch.Tensor | None:
    """``model.<stack>.layers[0].<attention>.attn``, or None if any link is missing."""
    try:
        weights = getattr(getattr(model, stack).layers[0], attention).attn
    except (AttributeError, IndexError, TypeError):
        return None
    return weights.detach().clone() if isinstance(weights, torch.Tensor) else None


def attention_weights(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """The attention weights ``(b, h, n_q, n_k)`` that the first encoder
    layer and the first decoder layer keep in ``.attn`` after
    ``model(src, tgt)`` in eval mode (None where missing): they show which
    keys each query was allowed to see."""
    model = build(module, config, seed)
    with torch.no_grad():
        model(src, tgt)
    return {
        "encoder_self": _kept_weights(model, "encoder", "self_attn"),
        "decoder_self": _kept_weights(model, "decoder", "self_attn"),
        "decoder_cross": _kept_weights(model, "decoder", "cross_attn"),
    }


def _capture_first_input(sub: object, store: dict, key: str):
    def hook(_module, args, kwargs):
        store[key] = (args[0] if args else kwargs.get("x")).detach().clone()
    return sub.register_forward_pre_hook(hook, with_kwargs=True) if isinstance(sub, nn.Module) else None


def stack_inputs(module: ModuleType, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """What ``model(src, tgt)`` feeds into ``model.encoder`` and
    ``model.decoder`` (their first argument; None if never called as a
    module), in eval mode, with the embedding tables and the positional
    table needed to check it."""
    model = build(module, config, seed)
    seen: dict = {}
    handles = [_capture_first_input(model.encoder, seen, "encoder_input"),
               _capture_first_input(model.decoder, seen, "decoder_input")]
    try:
        with torch.no_grad():
            model(src, tgt)
    finally:
        for handle in handles:
            if handle is not None:
                handle.remove()
    return {
        "encoder_input": seen.get("encoder_input"),
        "decoder_input": seen.get("decoder_input"),
        "encoder_type": type(model.encoder).__name__,
        "decoder_type": type(model.decoder).__name__,
        "src_embed": model.src_embed.weight.detach().clone(),
        "tgt_embed": model.tgt_embed.weight.detach().clone(),
        "pe": model.pos_encoding.pe.detach().clone(),
    }


def meta_forward(module: ModuleType, config: dict, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """Move the model to the ``meta`` device (tensors with shapes and no
    data) and call it on inputs there: any tensor the forward creates on
    the CPU instead of on the inputs' device makes it fail, as it would on
    a GPU. Returns the error text (None if it ran), the logits' shape and
    device, and the attributes that hide modules in plain lists (which
    ``.to()`` does not move either)."""
    model = module.Transformer(**config).eval().to("meta")
    found = {"error": None, "shape": None, "device": None, "hidden_lists": hidden_list_modules(model)}
    try:
        with torch.no_grad():
            logits = model(src.to("meta"), tgt.to("meta"))
    except NotImplementedError:
        raise  # the stub: report it as "not implemented", not as a device problem
    except (RuntimeError, TypeError, ValueError) as exc:
        return {**found, "error": f"{type(exc).__name__}: {exc}"}
    return {**found, "shape": list(logits.shape), "device": str(logits.device)}


def default_device_forward(module: ModuleType, config: dict, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """``model(src, tgt)`` on the CPU, while tensors created without a
    ``device=`` go to the ``meta`` device: a mask built with
    ``torch.ones(n, n)`` instead of ``torch.ones(n, n, device=tgt.device)``
    then meets the CPU inputs and the call fails. Cheap (no meta kernel runs
    for correct code), but a stray 0-dim tensor fails here although a GPU
    would accept it: confirm a failure with :func:`meta_forward`.
    Returns the same fields as :func:`meta_forward`."""
    model = module.Transformer(**config).eval()
    found = {"error": None, "shape": None, "device": None, "hidden_lists": hidden_list_modules(model)}
    try:
        with torch.no_grad(), torch.device("meta"):
            logits = model(src, tgt)
    except NotImplementedError:
        raise
    except (RuntimeError, TypeError, ValueError) as exc:
        return {**found, "error": f"{type(exc).__name__}: {exc}"}
    return {**found, "shape": list(logits.shape), "device": str(logits.device)}


def greedy_output(module: ModuleType, config: dict, seed: int, src: torch.Tensor, max_len: int,
                  start_symbol: int, end_symbol: int) -> dict:
    """``greedy_decode`` in eval mode, and for each step t >= 1 the argmax of
    the model's own ``forward(src, tokens[:, :t])`` at its last position
    (what a greedy decoder must have picked at step t, given its own prefix)."""
    model = build(module, config, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = model.greedy_decode(src, max_len, start_symbol, end_symbol)
    step_argmax = None
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.size(0) == src.size(0):
        with torch.no_grad():
            step_argmax = torch.stack(
                [model(src, tokens[:, :t].long())[:, -1].argmax(dim=-1) for t in range(1, tokens.size(1))], dim=1
            ) if tokens.size(1) > 1 else tokens.new_zeros(src.size(0), 0)
    return {"tokens": tokens, "step_argmax": step_argmax, "implicit_softmax": _implicit_softmax(caught)}


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def structure(module: ModuleType, config: dict) -> dict:
    """Registered parameters, buffers and children, the attributes that hide
    modules in plain lists, the number of parameters, and the number the
    contract implies (two embeddings, the shipped Encoder and Decoder of
    the exercise's folder, a Linear generator)."""
    model = module.Transformer(**config)
    folder = Path(module.__file__).parent
    encoder, decoder = load_module(folder, "encoder.py"), load_module(folder, "decoder.py")
    c = {"d_model": 512, "num_heads": 8, "num_encoder_layers": 6, "num_decoder_layers": 6,
         "d_ff": 2048, **config}
    d = c["d_model"]
    expected = (c["src_vocab"] * d + c["tgt_vocab"] * d + d * c["tgt_vocab"] + c["tgt_vocab"]
                + _count(encoder.Encoder(c["num_encoder_layers"], d, c["num_heads"], c["d_ff"]))
                + _count(decoder.Decoder(c["num_decoder_layers"], d, c["num_heads"], c["d_ff"])))
    return {**registered(model), "hidden_lists": hidden_list_modules(model),
            "n_parameters": _count(model), "expected_n_parameters": expected}


# --- the copy task -------------------------------------------------------------

COPY_CONFIG = {"src_vocab": 11, "tgt_vocab": 11, "d_model": 32, "num_heads": 4, "num_encoder_layers": 1,
               "num_decoder_layers": 1, "d_ff": 64, "dropout": 0.0, "max_len": 64, "pad_idx": 0}
PAD, START, END = 0, 1, 2  # tokens 3..10 are the symbols to copy


def copy_batch(gen: torch.Generator, batch: int, length: int, vocab: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    """src (batch, length) random symbols; tgt (batch, length + 2) =
    [START, the same symbols, END]."""
    src = torch.randint(END + 1, vocab, (batch, length), generator=gen)
    start = torch.full((batch, 1), START)
    end = torch.full((batch, 1), END)
    return src, torch.cat([start, src, end], dim=1)


def copy_task(module: ModuleType, seed: int = 0, steps: int = 200, batch: int = 32, length: int = 8,
              lr: float = 3e-3, n_test: int = 100) -> dict:
    """Train a tiny Transformer (``COPY_CONFIG``) to copy its input, with
    teacher forcing and cross-entropy on ``forward``'s output, then
    ``greedy_decode`` ``n_test`` new sequences.

    Returns the training losses, the exact-match rate of the greedy outputs
    (every token and the END right), the per-token accuracy, two example
    (source, output) pairs, the training time in seconds, and whether a
    softmax without ``dim`` was called.
    """
    model = module.Transformer(**COPY_CONFIG)
    init_by_name(model, seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    train_gen = torch.Generator().manual_seed(1_000 + seed)
    test_src, test_tgt = copy_batch(torch.Generator().manual_seed(999_999 + seed), n_test, length)
    losses = []
    # One thread: for a model this small, threads cost more than they save,
    # and on a busy machine a second thread can make training many times slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.train()
            started = time.perf_counter()
            for _ in range(steps):
                src, tgt = copy_batch(train_gen, batch, length)
                logits = model(src, tgt[:, :-1])  # position t predicts tgt[:, t + 1]
                loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(float(loss))
            seconds = time.perf_counter() - started
            model.eval()
            out = model.greedy_decode(test_src, length + 2, START, END)
    finally:
        torch.set_num_threads(threads)
    same_shape = isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(test_tgt.shape)
    return {
        "losses": losses,
        "exact_match": float((out == test_tgt).all(dim=1).float().mean()) if same_shape else 0.0,
        "token_accuracy": float((out == test_tgt)[:, 1:].float().mean()) if same_shape else 0.0,
        "examples": [(test_src[i].tolist(), out[i].tolist() if same_shape else None) for i in range(2)],
        "output_shape": list(out.shape) if isinstance(out, torch.Tensor) else None,
        "seconds": seconds,
        "implicit_softmax": _implicit_softmax(caught),
    }
