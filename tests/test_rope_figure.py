"""Exercise 16's README figure (docs/figures/rope_rotation.svg): the
committed SVG is what its script makes from the reference now, what it draws is RoPE's
claim (both vectors turn, their angle and score stay), and both READMEs
show it."""
from __future__ import annotations

import importlib.util
import math
import re

import pytest

from grader.course import REPO_ROOT

FOLDER = REPO_ROOT / "docs" / "figures"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("make_rope_figure", FOLDER / "make_rope_figure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_figure_is_what_the_script_makes(script):
    assert (FOLDER / "rope_rotation.svg").read_text(encoding="utf-8") == script.make(), \
        "regenerate: .venv/bin/python docs/figures/make_rope_figure.py"


def test_the_figure_shows_a_rotation_that_keeps_the_angle_and_the_score(script):
    pairs = script.rotated_pairs(script.reference())
    assert [p["positions"] for p in pairs] == [(2, 0), (7, 5)]
    angle = [math.atan2(p["q"][1], p["q"][0]) - math.atan2(p["k"][1], p["k"][0]) for p in pairs]
    assert math.cos(angle[0] - angle[1]) == pytest.approx(1.0, abs=1e-12)
    assert pairs[0]["score"] == pytest.approx(pairs[1]["score"], abs=1e-12)
    assert pairs[0]["q"] != pytest.approx(pairs[1]["q"])                     # the vectors did turn
    for p in pairs:
        assert math.hypot(*p["q"]) == pytest.approx(math.hypot(*script.QUERY))
        assert math.hypot(*p["k"]) == pytest.approx(math.hypot(*script.KEY))
    svg = (FOLDER / "rope_rotation.svg").read_text(encoding="utf-8")
    assert svg.count(f"= {pairs[0]['score']:.4f}") == 2 and re.search(r"[\u4e00-\u9fff]", svg)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_readmes_show_it(readme):
    text = (REPO_ROOT / "exercises" / "16_rope" / readme).read_text(encoding="utf-8")
    assert "](../../docs/figures/rope_rotation.svg)" in text
