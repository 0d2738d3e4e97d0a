"""Exercise 15's README figures: docs/figures/flash_attention_causal_blocks.svg
is what docs/figures/make_flash_figures.py makes from the reference now,
and it shows the blocks the README describes; flash_attention_memory.svg
is a measured run of bench/flash_attention_memory.py --svg (its drawing is
tested here on given numbers; the numbers are the bench's)."""
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


def test_the_memory_figure_draws_the_measured_rows_and_is_shown():
    import xml.etree.ElementTree as ElementTree

    spec = importlib.util.spec_from_file_location("flash_attention_memory", REPO / "bench" / "flash_attention_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    svg = bench.memory_svg([(1024, 1.0, 12.0), (2048, 2.0, 60.0), (4096, 7.0, None)], "title", "subtitle")
    root = ElementTree.fromstring(svg)
    paths = [e for e in root.iter() if e.tag.endswith("path")]
    # tiled: 3 points, naive: the 2 measured ones (the skipped n is left out), n x n guide: 3
    assert [p.get("d").count("L") + 1 for p in paths] == [3, 2, 3]
    committed = ElementTree.fromstring((REPO / "docs" / "figures" / "flash_attention_memory.svg").read_text())
    texts = " ".join(e.text or "" for e in committed.iter())
    assert "tiled (exercise 15)" in texts and "naive (exercise 03)" in texts
    for readme in ("README.md", "README.zh.md"):
        assert "../../docs/figures/flash_attention_memory.svg" in (
            REPO / "exercises" / "15_flash_attention" / readme).read_text(encoding="utf-8")
