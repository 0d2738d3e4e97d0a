"""How much exercise 14's KV cache saves, and how the saving grows with length.

    python bench/kv_cache_speedup.py [--lengths 32 64 128 256 512] [--d-model 64] [--repeats 3]

For each length n, greedy decoding of n new tokens from a one-token prompt,
twice in the same run with the same model (exercise 12's reference GPT,
float32, one thread): by recomputation, ``model(idx)`` on everything so far
at every step, and by ``generate_cached`` from ``solutions/14_kv_cache``.
Both must give the same tokens (checked). Prints the best time of each and
their ratio per length, and how the ratio grew since the previous length.

Recomputation costs O(n³ d + n² d²) for n tokens, the cache O(n² d + n d²)
(the complexity table of notes/02_sequence_models.md, summed over the
steps): the ratio should grow about in proportion to n, once n is large
enough that the per-step overhead of Python and small kernels stops dominating.
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


def reference_module(workdir: Path):
    """solutions/14_kv_cache/kv_cache.py, with the modules it ships (gpt.py ...)."""
    course = load_course()
    exercise = course.exercise("14")
    source = (REPO / "solutions" / exercise.folder / exercise.module).read_bytes()
    return load_module(assemble(exercise, source, workdir, course, REPO), exercise.module)


@torch.no_grad()
def recompute(model, idx: torch.Tensor, new: int) -> torch.Tensor:
    """Greedy decoding without a cache: the whole sequence at every step."""
    for _ in range(new):
        idx = torch.cat([idx, model(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def best_time(run, repeats: int) -> tuple[float, torch.Tensor]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the two methods compared under the same, steady conditions
    with tempfile.TemporaryDirectory() as tmp:
        ref = reference_module(Path(tmp))
        torch.manual_seed(0)
        model = ref.GPT(vocab_size=64, context_length=max(args.lengths) + 1, d_model=args.d_model,
                        num_heads=args.heads, num_layers=args.layers).eval()
        prompt = torch.tensor([[1]])
        recompute(model, prompt, 8), ref.generate_cached(model, prompt, 8)  # warm-up: first calls pay set-up
        print(f"GPT d_model={args.d_model}, {args.layers} layers, {args.heads} heads, float32, 1 thread; "
              f"greedy decoding of n tokens, best of {args.repeats}")
        print(f"{'n':>6} {'recompute s':>12} {'cached s':>10} {'speed-up':>9} {'growth':>7}")
        previous = None
        for n in args.lengths:
            slow, expected = best_time(lambda: recompute(model, prompt, n), args.repeats)
            fast, got = best_time(lambda: ref.generate_cached(model, prompt, n), args.repeats)
            if not torch.equal(got, expected):
                raise SystemExit(f"n={n}: the cached tokens differ from the recomputation's")
            ratio = slow / fast
            growth = f"{ratio / previous[1]:.2f}x" if previous else "-"
            print(f"{n:>6} {slow:>12.3f} {fast:>10.3f} {ratio:>8.1f}x {growth:>7}")
            previous = (n, ratio)


if __name__ == "__main__":
    main()
