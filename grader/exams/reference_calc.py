"""Numeric answers computed by running the reference solutions.

A question with ``compute: {name: mha_parameters, args: {...}}`` gets its
answer for each variant from the function registered here under that name,
called on the reference module of the exercise it names (or on plain
PyTorch when it names none).

The computations run in a child process (``python -m
grader.exams.reference_calc``), all variants of a class in one go: the
grader process never imports exercise modules, and the child only ever
imports references (from folders assembled like the judge's), never a
student's file.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 300


@dataclass(frozen=True)
class Computation:
    name: str
    exercise: str | None        # whose reference it runs; None: PyTorch only
    function: Callable


COMPUTATIONS: dict[str, Computation] = {}


def computation(name: str, exercise: str | None = None) -> Callable:
    def register(function: Callable) -> Callable:
        COMPUTATIONS[name] = Computation(name, exercise, function)
        return function
    return register


class ReferenceCalcError(Exception):
    """A computation failed or the child process broke; the message says which."""


# ------------------------------------------------------------- the computations
# Each takes the reference module (or None) and plain numbers; it returns a
# number or a list of numbers. torch is imported inside: this module is also
# imported by the validator, which must stay light.


@computation("mha_parameters", exercise="06")
def _mha_parameters(ref, d_in, d_out, context_length, num_heads, qkv_bias=0):
    model = ref.MultiHeadAttention(int(d_in), int(d_out), int(context_length), 0.0, int(num_heads),
                                   qkv_bias=bool(qkv_bias))
    return sum(p.numel() for p in model.parameters())


@computation("wrapper_parameters", exercise="06")
def _wrapper_parameters(ref, d_in, d_out, context_length, num_heads, qkv_bias=0):
    model = ref.MultiHeadAttentionWrapper(int(d_in), int(d_out), int(context_length), 0.0, int(num_heads),
                                          qkv_bias=bool(qkv_bias))
    return sum(p.numel() for p in model.parameters())


@computation("split_heads_shape", exercise="06")
def _split_heads_shape(ref, batch, seq_len, d_model, heads):
    import torch
    return list(ref.split_heads(torch.zeros(int(batch), int(seq_len), int(d_model)), int(heads)).shape)


@computation("causal_weight", exercise="03")
def _causal_weight(ref, seq_len, query, key, d_k=4):
    """The weight query position ``query`` gives key position ``key`` under a
    causal mask when every score is equal (all queries zero)."""
    import torch
    n = int(seq_len)
    q, k = torch.zeros(1, n, int(d_k)), torch.randn(1, n, int(d_k), generator=torch.Generator().manual_seed(0))
    _, weights = ref.scaled_dot_product_attention(q, k, torch.eye(n).unsqueeze(0), mask=ref.causal_mask(n))
    return float(weights[0, int(query), int(key)])


@computation("causal_blocked_count", exercise="03")
def _causal_blocked_count(ref, seq_len):
    return int(ref.causal_mask(int(seq_len)).sum())


@computation("attention_output_shape", exercise="03")
def _attention_output_shape(ref, batch, n_q, n_k, d_k, d_v):
    import torch
    q, k, v = torch.zeros(int(batch), int(n_q), int(d_k)), torch.zeros(int(batch), int(n_k), int(d_k)), \
        torch.zeros(int(batch), int(n_k), int(d_v))
    output, _ = ref.scaled_dot_product_attention(q, k, v)
    return list(output.shape)


@computation("pe_value", exercise="07")
def _pe_value(ref, position, column, d_model):
    return float(ref.sinusoidal_table(int(position) + 1, int(d_model))[int(position), int(column)])


@computation("encoder_layer_parameters", exercise="09")
def _encoder_layer_parameters(ref, d_model, heads, d_ff):
    return sum(p.numel() for p in ref.EncoderLayer(int(d_model), int(heads), int(d_ff)).parameters())


@computation("embedding_parameters")
def _embedding_parameters(ref, vocab, d_model):
    import torch
    return sum(p.numel() for p in torch.nn.Embedding(int(vocab), int(d_model)).parameters())


@computation("dropout_train_scale")
def _dropout_train_scale(ref, p):
    """What nn.Dropout(p) multiplies a kept element by in training mode."""
    import torch
    torch.manual_seed(0)
    return float(torch.nn.Dropout(float(p)).train()(torch.ones(4096)).max())


# --- part C: the GPT (exercise 12), its KV cache and sampling

def _gpt(ref, vocab_size, context_length, d_model, num_heads, num_layers, tie_weights=True):
    return ref.GPT(int(vocab_size), int(context_length), int(d_model), int(num_heads), int(num_layers),
                   tie_weights=bool(tie_weights))


@computation("kv_cache_bytes_per_token", exercise="12")
def _kv_cache_bytes_per_token(ref, d_model, num_heads, num_layers, value_bytes, vocab_size=32, context_length=8):
    """What one more token adds to a KV cache of the reference GPT: the
    keys and values its attention modules compute for that token (every
    layer, every head), stored at ``value_bytes`` per number."""
    import torch
    model = _gpt(ref, vocab_size, context_length, d_model, num_heads, num_layers).eval()
    cached = []
    hooks = [module.register_forward_hook(lambda _m, _i, out: cached.append(out.numel()))
             for name, module in model.named_modules() if name.rsplit(".", 1)[-1] in ("W_key", "W_value")]
    with torch.no_grad():
        model(torch.zeros(1, 1, dtype=torch.long))  # one token: what it adds to the cache
    for hook in hooks:
        hook.remove()
    return sum(cached) * int(value_bytes)


@computation("tied_parameters_saved", exercise="12")
def _tied_parameters_saved(ref, vocab_size, context_length, d_model, num_heads, num_layers):
    """Parameters of the reference GPT untied minus tied (a shared Parameter counts once)."""
    def count(tie):
        return sum(p.numel() for p in _gpt(ref, vocab_size, context_length, d_model, num_heads, num_layers,
                                           tie).parameters())
    return count(False) - count(True)


# --- part D: grouped-query attention (exercise 17)

def _gqa(ref, num_heads, num_kv_heads, head_dim, d_in=None):
    d_out = int(num_heads) * int(head_dim)
    return ref.GroupedQueryAttention(int(d_in or d_out), d_out, 4, 0.0, int(num_heads), int(num_kv_heads))


@computation("gqa_cache_bytes_per_token", exercise="17")
def _gqa_cache_bytes_per_token(ref, num_layers, num_heads, num_kv_heads, head_dim, value_bytes):
    """What one more token adds to the KV cache of ``num_layers`` reference
    GroupedQueryAttention layers: the keys and values its forward_cached
    returns for one token (the cache itself, measured), at ``value_bytes`` per number."""
    import torch
    layer = _gqa(ref, num_heads, num_kv_heads, head_dim).eval()
    with torch.no_grad():
        _, (keys, values) = layer.forward_cached(torch.zeros(1, 1, layer.W_query.in_features))
    return (keys.numel() + values.numel()) * int(num_layers) * int(value_bytes)


@computation("gqa_parameters", exercise="17")
def _gqa_parameters(ref, num_heads, num_kv_heads, head_dim, d_in=None):
    return sum(p.numel() for p in _gqa(ref, num_heads, num_kv_heads, head_dim, d_in).parameters())


@computation("temperature_probability")
def _temperature_probability(ref, temperature, first, second, third=0.0):
    """The probability of the first token when sampling from logits
    [first, second, third] at ``temperature`` (softmax of logits / T)."""
    import torch
    logits = torch.tensor([float(first), float(second), float(third)], dtype=torch.float64)
    return float(torch.softmax(logits / float(temperature), dim=-1)[0])


# --- part D: tiled attention (exercise 15)

@computation("flash_causal_blocks_visited")
def _flash_causal_blocks_visited(ref, n_q, extra_keys, block_size):
    """(query block, key block) pairs a causal tiled attention visits, the
    diagonal aligned bottom-right: exercise 15's README rule, key blocks
    range(0, min(n_k, q_end + n_k - n_q), block_size) per query block."""
    n_q, block = int(n_q), int(block_size)
    n_k = n_q + int(extra_keys)
    return sum(-(-max(0, min(n_k, min(n_q, start + block) + n_k - n_q)) // block) for start in range(0, n_q, block))


# --- part D: rotary position embeddings (exercise 16)

@computation("rope_score", exercise="16")
def _rope_score(ref, query_position, key_position, key_second):
    """(R_i q) · (R_j k) with the reference's apply_rope, head_dim 2: q = (2, 1), k = (1, key_second)."""
    import torch
    q = torch.tensor([2.0, 1.0], dtype=torch.float64).reshape(1, 1, 1, 2)
    k = torch.tensor([1.0, float(key_second)], dtype=torch.float64).reshape(1, 1, 1, 2)
    rotated_q = ref.apply_rope(q, torch.tensor([int(query_position)]))
    rotated_k = ref.apply_rope(k, torch.tensor([int(key_position)]))
    return float((rotated_q * rotated_k).sum())


@computation("rope_wavelength", exercise="16")
def _rope_wavelength(ref, head_dim, pair, base):
    """2π over the angle pair ``pair`` turns per position, read from the reference's rope_angles."""
    import math

    import torch
    cos, sin = ref.rope_angles(2, int(head_dim), float(base), dtype=torch.float64)
    return 2 * math.pi / math.atan2(float(sin[1, int(pair)]), float(cos[1, int(pair)]))


# --- part D: sliding-window attention (exercise 18)

@computation("receptive_field", exercise="18")
def _receptive_field(ref, num_layers, window):
    return int(ref.receptive_field(int(num_layers), int(window)))


@computation("rolling_cache_bytes", exercise="18")
def _rolling_cache_bytes(ref, d_model, num_heads, num_layers, window, tokens, value_bytes):
    """The bytes the reference's rolling cache holds after ``tokens`` tokens
    of one sequence through its NoPE GPT, at ``value_bytes`` per number."""
    import torch
    model = _gpt(ref, 8, 4, d_model, num_heads, num_layers).eval()
    model.pos_emb = None
    cache = ref.RollingKVCache(int(num_layers), int(window))
    with torch.no_grad():
        ref.forward_cached(model, torch.zeros(1, int(tokens), dtype=torch.long), cache)
    return sum(t.numel() for t in [*cache.keys, *cache.values]) * int(value_bytes)


@computation("ring_slot", exercise="18")
def _ring_slot(ref, window, position):
    """The slot of the reference's ring that holds ``position`` after positions 0..position."""
    import torch
    cache = ref.RollingKVCache(1, int(window))
    for p in range(int(position) + 1):
        tag = torch.full((1, 1, 1, 1), float(p))
        cache.append(0, tag, tag)
    return int((cache.keys[0][0, 0, :, 0] == float(position)).nonzero()[0])


# ------------------------------------------------------------- the parent side


# Results already computed in this process, keyed by the request and the
# bytes of the references it runs: a second grading run (or `exam variant`
# then `exam grade` in one session) does not start torch again.
_CACHE: dict[tuple, object] = {}


def _reference_digest(course, exercise_id: str | None, root: Path) -> str:
    if exercise_id is None:
        return ""
    exercise = course.exercise(exercise_id)
    digest = hashlib.sha256()
    for source_id in [*exercise.ships, exercise_id]:
        source = course.exercise(source_id)
        digest.update((root / "solutions" / source.folder / source.module).read_bytes())
    return digest.hexdigest()


def compute_many(course, requests: list[tuple[str, tuple]], root: Path) -> list:
    """The value of each ``(name, ((arg, value), ...))`` request, in order."""
    unknown = sorted({name for name, _ in requests if name not in COMPUTATIONS})
    if unknown:
        raise ReferenceCalcError(f"unknown computation(s): {', '.join(unknown)}")
    digests = {eid: _reference_digest(course, eid, root) for eid in {COMPUTATIONS[n].exercise for n, _ in requests}}
    keys = [(name, args, digests[COMPUTATIONS[name].exercise]) for name, args in requests]
    missing = [(name, args) for (name, args, digest) in keys if (name, args, digest) not in _CACHE]
    for (name, args), value in zip(missing, _run_child(course, missing, root)):
        _CACHE[(name, args, digests[COMPUTATIONS[name].exercise])] = value
    return [_CACHE[key] for key in keys]


def _run_child(course, requests: list[tuple[str, tuple]], root: Path) -> list:
    from grader.intake.submissions import assemble

    if not requests:
        return []
    with tempfile.TemporaryDirectory(prefix="reference-calc-") as workdir:
        folders = {}
        for exercise_id in sorted({COMPUTATIONS[n].exercise for n, _ in requests} - {None}):
            exercise = course.exercise(exercise_id)
            source = (root / "solutions" / exercise.folder / exercise.module).read_bytes()
            target = assemble(exercise, source, Path(workdir) / exercise.folder, course, root)
            folders[exercise_id] = [str(target), exercise.module_name]
        payload = {"folders": folders, "requests": [[name, dict(args)] for name, args in requests]}
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
        try:
            run = subprocess.run([sys.executable, "-m", "grader.exams.reference_calc"], input=json.dumps(payload),
                                 capture_output=True, text=True, timeout=TIMEOUT_S, cwd=workdir, env=env)
        except subprocess.TimeoutExpired as exc:
            raise ReferenceCalcError(f"the reference computations took longer than {TIMEOUT_S} s") from exc
    if run.returncode != 0:
        raise ReferenceCalcError(f"the reference computations failed:\n{run.stderr[-2000:]}")
    results = json.loads(run.stdout)["results"]
    for (name, args), result in zip(requests, results):
        if isinstance(result, dict):
            raise ReferenceCalcError(f"{name}({dict(args)}) on the reference: {result['error']}")
    return results


# ------------------------------------------------------------- the child side


def _child() -> None:
    import torch

    from coursekit.loader import load_module

    torch.set_num_threads(1)
    payload = json.loads(sys.stdin.read())
    modules = {eid: load_module(folder, module) for eid, (folder, module) in payload["folders"].items()}
    results = []
    for name, args in payload["requests"]:
        calc = COMPUTATIONS[name]
        try:
            results.append(calc.function(modules.get(calc.exercise), **args))
        except Exception as exc:  # reported per request, with its name and arguments
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    _child()
