"""Peak memory and time of exercise 15's tiled attention against exercise
03's naive attention, forward and backward, as n grows.

    python bench/flash_attention_memory.py [--lengths 1024 2048 4096 8192 16384] [--head-dim 64]
                                           [--block-size 256] [--naive-limit-gib 6] [--quick]

For each n, one causal float32 sequence (batch 1, one head) through
``flash_attention`` from ``solutions/15_flash_attention`` and through
``scaled_dot_product_attention`` from ``solutions/03_masking`` (autograd),
each in a fresh process of its own: the process resets its peak resident
memory (``/proc/self/clear_refs``) once the inputs exist, runs the forward
and the backward, and reports how far its peak rose (``VmHWM``) and the
time taken, the way the grader's memory check reads a sandboxed child.
Prints both, the ratio measured in this run, and the size of one n × n
float32 matrix. Naive attention needs several n × n matrices at once: it is
skipped where 5 of them would pass ``--naive-limit-gib`` (16384 needs
~5 GiB). ``--quick``: n = 512 and 1024 only (a few seconds).
``--svg PATH``: also draw the measured figures, memory against n on log
axes (docs/figures/flash_attention_memory.svg is one such run).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure_here(kind: str, n: int, head_dim: int, block_size: int) -> dict:
    """In this process: forward and backward once; peak growth (bytes) and seconds."""
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, str(REPO / "solutions" / ("15_flash_attention" if kind == "tiled" else "03_masking")))
    gen = torch.Generator().manual_seed(0)
    q, k, v, grad = (torch.randn(1, n, head_dim, generator=gen) for _ in range(4))
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    if kind == "tiled":
        from flash_attention import flash_attention

        def run() -> torch.Tensor:
            return flash_attention(q, k, v, block_size=block_size, causal=True)
    else:
        from attention import scaled_dot_product_attention
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)   # part of naive attention's cost: n × n bools

        def run() -> torch.Tensor:
            return scaled_dot_product_attention(q, k, v, mask)[0]
    # Warm up on a copy of the first rows: PyTorch's first backward loads
    # hundreds of modules (~40 MiB), which is not the attention's memory.
    # The same block size: the first matrix product of a size sets up buffers of its own.
    warm = min(n, 2 * max(block_size, 64))
    small = [t[:, :warm].detach().requires_grad_(True) for t in (q, k, v)]
    (flash_attention(*small, block_size=block_size, causal=True) if kind == "tiled"
     else scaled_dot_product_attention(*small, mask[:warm, :warm])[0]).sum().backward()
    growth, seconds = [], []
    for _ in range(2):   # the better of two: what the process set up once is not the attention's
        q.grad = k.grad = v.grad = None
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before, start = _status("VmRSS:"), time.perf_counter()
        run().backward(grad)
        seconds.append(time.perf_counter() - start)
        growth.append(_status("VmHWM:") - before)
    return {"growth": min(growth), "seconds": min(seconds)}


def measure(kind: str, n: int, head_dim: int, block_size: int) -> dict:
    """:func:`measure_here` in a fresh process (peaks do not mix)."""
    done = subprocess.run([sys.executable, __file__, "--one", kind, str(n), str(head_dim), str(block_size)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_svg(rows: list[tuple[int, float, float | None]], title: str, subtitle: str) -> str:
    """A small log-log line chart: (n, tiled MiB, naive MiB or None) per row,
    and the n × n float32 matrix as a dashed guide. Plain SVG, no library."""
    import math

    width, height, left, right, top, bottom = 600, 350, 70, 160, 50, 50
    ns = [n for n, _, _ in rows]
    values = [v for _, t, nv in rows for v in (t, nv) if v] + [n * n * 4 / MIB for n in ns]
    lo, hi = math.log10(max(min(values), 0.1)), math.log10(max(values))
    x_lo, x_hi = math.log10(min(ns)), math.log10(max(ns)) if len(ns) > 1 else math.log10(min(ns)) + 1

    def xy(n: float, mib: float) -> tuple[float, float]:
        x = left + (math.log10(n) - x_lo) / (x_hi - x_lo) * (width - left - right)
        y = top + (hi - math.log10(max(mib, 0.1))) / max(hi - lo, 1e-9) * (height - top - bottom)
        return round(x, 1), round(y, 1)

    def line(points: list[tuple[int, float]], colour: str, dash: str = "") -> str:
        path = " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y) in enumerate(xy(n, v) for n, v in points))
        dots = "".join(f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>' for x, y in (xy(n, v) for n, v in points))
        return f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2" {dash}/>{dots}'

    series = [("tiled (exercise 15)", "#1b7837", [(n, t) for n, t, _ in rows], ""),
              ("naive (exercise 03)", "#c51b7d", [(n, nv) for n, _, nv in rows if nv], ""),
              ("one n × n float32", "#777777", [(n, n * n * 4 / MIB) for n in ns], 'stroke-dasharray="5,4"')]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{left}" y="20" font-size="13">{title}</text>',
             f'<text x="{left}" y="36" fill="#555555">{subtitle}</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>']
    for n in ns:
        x, _ = xy(n, 1)
        parts.append(f'<text x="{x}" y="{height - bottom + 16}" text-anchor="middle">{n}</text>')
    for exponent in range(math.floor(lo), math.ceil(hi) + 1):
        _, y = xy(min(ns), 10 ** exponent)
        if top - 1 <= y <= height - bottom + 1:
            parts.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{10 ** exponent:g}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">n (positions)</text>')
    parts.append(f'<text x="16" y="{(top + height - bottom) / 2}" transform="rotate(-90 16 '
                 f'{(top + height - bottom) / 2})" text-anchor="middle">peak growth, MiB</text>')
    for i, (label, colour, points, dash) in enumerate(series):
        if points:
            parts.append(line(points, colour, dash))
        parts.append(f'<line x1="{width - right + 12}" y1="{top + 10 + 20 * i}" x2="{width - right + 32}" '
                     f'y2="{top + 10 + 20 * i}" stroke="{colour}" stroke-width="2" {dash}/>')
        parts.append(f'<text x="{width - right + 36}" y="{top + 14 + 20 * i}">{label}</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--naive-limit-gib", type=float, default=6.0)
    parser.add_argument("--quick", action="store_true", help="n = 512 and 1024 only")
    parser.add_argument("--svg", type=Path, help="also draw the measured memory against n into this SVG file")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        kind, *sizes = args.one
        print(json.dumps(measure_here(kind, *map(int, sizes))))
        return 0
    lengths = [512, 1024] if args.quick else args.lengths
    print(f"causal float32, head_dim {args.head_dim}, block_size {args.block_size}, one thread; "
          "peak memory growth during forward + backward")
    print(f"{'n':>6} {'n×n MiB':>8} {'tiled MiB':>10} {'naive MiB':>10} {'ratio':>7} {'tiled s':>8} {'naive s':>8}")
    rows = []
    for n in lengths:
        matrix = n * n * 4
        tiled = measure("tiled", n, args.head_dim, args.block_size)
        naive = None if 5 * matrix > args.naive_limit_gib * (1 << 30) else measure("naive", n, args.head_dim, 0)
        ratio = f"{naive['growth'] / max(tiled['growth'], MIB):7.1f}" if naive else f"{'-':>7}"
        print(f"{n:>6} {matrix / MIB:>8.0f} {tiled['growth'] / MIB:>10.1f} "
              f"{(naive['growth'] / MIB if naive else float('nan')):>10.1f} {ratio} {tiled['seconds']:>8.2f} "
              f"{(naive['seconds'] if naive else float('nan')):>8.2f}")
        rows.append((n, tiled["growth"] / MIB, naive["growth"] / MIB if naive else None))
    if args.svg:
        args.svg.write_text(memory_svg(rows, "Peak memory of causal attention, forward + backward",
                                       f"float32, head_dim {args.head_dim}, block {args.block_size}, measured "
                                       "(bench/flash_attention_memory.py)"), encoding="utf-8")
        print(f"wrote {args.svg}")
    print("ratio: naive's peak growth over tiled's (tiled's counted as at least 1 MiB), measured in this run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
