"""Regenerate exercise 15's README figure: the blocks a causal tiled
attention visits and skips.

    .venv/bin/python docs/figures/make_flash_figures.py [--out docs/figures] [--check]

``flash_attention_causal_blocks.svg``: exercise 15's reference run with
block_size 4, recorded block by block (which (query block, key block)
pairs it computes scores for), for n_q = n_k = 16 and for 8 queries
against 16 keys (the diagonal aligned bottom-right). Each cell is a
(query, key) pair: 1 = computed and seen, 0.5 = computed in a block that
crosses the diagonal but masked, 0 = in a block never visited. Under a
second, no training: exact on every run.

``--check`` compares with the committed file instead of writing it (exit 1
on a difference).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from grader.report.attention_figures import Panel, attention_figure  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_figures import reference_module  # noqa: E402

BLOCK = 4
CASES = ((16, 16), (8, 16))
NAME = "flash_attention_causal_blocks.svg"


class _BlockScores(TorchFunctionMode):
    """Records every score block: the result of a matmul of a query block
    (a view of the query tensor) with a key block transposed, by where
    those views start in their tensors."""

    def __init__(self, query: torch.Tensor, key: torch.Tensor) -> None:
        super().__init__()
        self.query, self.key, self.blocks = query, key, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in ("matmul", "__matmul__") and len(args) == 2:
            q, k_t = args
            if q._base is self.query or q is self.query:
                if k_t._base is self.key or k_t is self.key:
                    row = q.storage_offset() // self.query.stride(-2)
                    col = k_t.storage_offset() // self.key.stride(-2)
                    self.blocks.append((row, q.size(-2), col, k_t.size(-1)))
        return out


def visited(reference, n_q: int, n_k: int) -> list[list[float]]:
    """(n_q, n_k): 1 seen, 0.5 computed but masked, 0 never computed."""
    query, key = torch.zeros(n_q, 1), torch.zeros(n_k, 1)
    with _BlockScores(query, key) as watch:
        reference.tiled_attention(query, key, torch.zeros(n_k, 1), block_size=BLOCK, causal=True)
    grid = torch.zeros(n_q, n_k, dtype=torch.float64)
    seen = ~torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
    for row, rows, col, cols in watch.blocks:
        block = seen[row:row + rows, col:col + cols]
        grid[row:row + rows, col:col + cols] = torch.where(block, 1.0, 0.5)
    return grid.tolist()


def make_all() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as work:
        reference = reference_module("15_flash_attention", "flash_attention", Path(work))
        panels = [Panel((f"n_q = {n_q}, n_k = {n_k}", f"n_q = {n_q}，n_k = {n_k}"), visited(reference, n_q, n_k),
                        [str(i) for i in range(n_q)], [str(j) for j in range(n_k)]) for n_q, n_k in CASES]
    svg = attention_figure(
        panels,
        (f"Causal tiled attention, block_size {BLOCK}: 1 = computed and seen, 0.5 = computed in a block on the "
         "diagonal but masked, 0 = a block above the diagonal, never visited. With n_q < n_k the queries are the "
         "last positions (bottom-right).",
         f"因果分块注意力，block_size 为 {BLOCK}：1 = 计算且可见，0.5 = 在对角线上的块中计算但被遮蔽，0 = 对角线"
         "之上的块，从未访问。n_q < n_k 时 query 是最后的若干位置（右下对齐）。"),
        axes=("keys", "queries"))
    return {NAME: str(svg) + "\n"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "figures")
    parser.add_argument("--check", action="store_true", help="compare with the file in --out; write nothing")
    args = parser.parse_args(argv)
    differ = []
    for name, svg in make_all().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != svg:
                differ.append(name)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    if differ:
        print("differs from the committed figure: " + ", ".join(differ))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
