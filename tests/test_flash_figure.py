"""Exercise 15's README figure (docs/figures/flash_attention_causal_blocks.svg)
is what docs/figures/make_flash_figures.py makes from the reference now,
and it shows the blocks the README describes."""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "docs" / "figures" / "make_flash_figures.py"


def _script():
    spec = importlib.util.spec_from_file_location("make_flash_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_figure_is_up_to_date():
    assert _script().main(["--check"]) == 0, "run .venv/bin/python docs/figures/make_flash_figures.py"


def test_blocks_above_the_diagonal_are_never_visited():
    script = _script()
    with tempfile.TemporaryDirectory() as work:
        reference = script.reference_module("15_flash_attention", "flash_attention", Path(work))
        grid = script.visited(reference, 8, 16)     # 8 queries, the last of 16 positions
    # Query block 0 (positions 8-11) computes key blocks 0-2, masks inside block 2,
    # and never visits block 3 (keys 12-15).
    assert grid[0][:9] == [1.0] * 9 and grid[0][9:12] == [0.5] * 3 and grid[0][12:] == [0.0] * 4
    assert all(value == 1.0 for value in grid[7])     # the last query sees every key
