"""What grouped-query attention saves: exercise 17's cache against exercise 14's.

    python bench/gqa_cache.py [--quick] [--length 512] [--d-model 256] [--heads 8] [--layers 4] [--batch 8]

Two measurements, each in one run so that their ratios compare like with like:

1. **Bytes.** Exercise 14's reference GPT (multi-head attention, ``num_heads``
   key/value heads per layer) decodes a prompt with its ``KVCache``; a stack
   of exercise 17's reference ``GroupedQueryAttention`` layers of the same
   ``d_model``, heads and depth decodes the same number of tokens, once per
   ``num_kv_heads`` (``heads``, ``heads / 2``, ..., 1). The bytes per token
   of one sequence are read from the cache tensors themselves (never from a
   formula) and compared with 14's: the ratio must be ``heads / num_kv_heads``
   (checked), and equal to ``cache_bytes_per_token``.
2. **Time.** The GQA stack's cached decoding of ``length`` tokens, one
   thread, best of ``--repeats``, per ``num_kv_heads``, and its ratio to
   ``num_kv_heads == heads`` (multi-head attention). On a CPU the saving in
   time is modest: a decoding step reads the whole cache, and the smaller
   cache is read faster, but small matrix products and Python overhead weigh
   as much at these sizes. On a GPU with long contexts and large batches,
   where decoding is memory-bound (notes/07_gqa.md §1), it is larger.

The stack is attention only (``x <- x + gqa_l(x)``, the next input being
the last output): enough to drive the cache, not a language model.
``--quick`` runs tiny sizes in a few seconds.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from coursekit.loader import load_module  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.intake.submissions import assemble  # noqa: E402


def reference(exercise_id: str, workdir: Path):
    """The reference module of an exercise, with the modules it ships."""
    course = load_course()
    exercise = course.exercise(exercise_id)
    source = (REPO / "solutions" / exercise.folder / exercise.module).read_bytes()
    return load_module(assemble(exercise, source, workdir / exercise.folder, course, REPO), exercise.module)


def bytes_per_token(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Bytes per token of one sequence held by (keys, values) pairs of shape (b, heads, t, head_dim)."""
    batch, tokens = pairs[0][0].size(0), pairs[0][0].size(2)
    return sum(t.numel() * t.element_size() for pair in pairs for t in pair) / (batch * tokens)


@torch.no_grad()
def kv_cache_14(ref14, args) -> float:
    """Exercise 14's GPT (MHA): bytes per token of one sequence in its KVCache after decoding."""
    model = ref14.GPT(vocab_size=64, context_length=args.length + 1, d_model=args.d_model, num_heads=args.heads,
                      num_layers=args.layers).eval()
    cache = ref14.KVCache(args.layers, args.length + 1)
    ref14.forward_cached(model, torch.randint(0, 64, (args.batch, args.length)), cache)
    return bytes_per_token(list(zip(cache.keys, cache.values)))


@torch.no_grad()
def decode(layers: list, x: torch.Tensor, new: int) -> tuple[torch.Tensor, list]:
    """A prefill of ``x``, then ``new`` cached steps through the stack."""
    past: list = [None] * len(layers)
    for step in range(new + 1):
        h = x if step == 0 else h[:, -1:]
        for i, layer in enumerate(layers):
            out, past[i] = layer.forward_cached(h, past[i])
            h = h + out
    return h, past


def best_time(run, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a few seconds")
    parser.add_argument("--length", type=int, default=512, help="tokens decoded (after a 1-token prompt)")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.length, args.d_model, args.heads, args.layers, args.batch, args.repeats = 32, 32, 4, 2, 2, 1
    torch.set_num_threads(1)   # every configuration under the same, steady conditions
    with tempfile.TemporaryDirectory() as tmp:
        ref14, ref17 = reference("14", Path(tmp)), reference("17", Path(tmp))
        mha_bytes = kv_cache_14(ref14, args)
        head_dim = args.d_model // args.heads
        print(f"d_model={args.d_model}, {args.heads} query heads of {head_dim}, {args.layers} layers, float32, "
              f"batch {args.batch}, {args.length} tokens decoded, 1 thread, best of {args.repeats}")
        print(f"exercise 14 (GPT, multi-head attention): {mha_bytes:,.0f} bytes per token of one sequence")
        print(f"{'kv heads':>8} {'bytes/token':>12} {'vs 14':>7} {'decode s':>9} {'vs MHA':>7}")
        kv_counts = [g for g in range(args.heads, 0, -1) if args.heads % g == 0]   # MHA first, MQA last
        mha_time = None
        for g in kv_counts:
            torch.manual_seed(0)
            layers = [ref17.GroupedQueryAttention(args.d_model, args.d_model, args.length + 1, 0.0, args.heads, g).eval()
                      for _ in range(args.layers)]
            prompt = torch.randn(args.batch, 1, args.d_model)
            decode(layers, prompt, 4)   # warm-up: first calls pay set-up
            seconds, (_, past) = best_time(lambda: decode(layers, prompt, args.length - 1), args.repeats)
            measured = bytes_per_token(past)
            expected = ref17.cache_bytes_per_token(args.layers, g, head_dim, dtype=torch.float32)
            assert measured == expected, (measured, expected)
            assert abs(mha_bytes / measured - args.heads / g) < 1e-9, "the saving is not num_heads / num_kv_heads"
            mha_time = mha_time or seconds
            print(f"{g:>8} {measured:>12,.0f} {mha_bytes / measured:>6.1f}x {seconds:>9.3f} {mha_time / seconds:>6.2f}x")


if __name__ == "__main__":
    main()
