"""Attention made visible: the heat-map renderer (grader/report/attention_figures.py),
the probe that records attention weights (coursekit/probes/attention_maps.py), and
the committed README figures (docs/figures/, made by docs/figures/make_figures.py)."""
from __future__ import annotations

import math
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from coursekit.loader import load_module
from coursekit.probes import attention_maps, copy_task
from grader.report.attention_figures import (NO_RESULT, FigureDataError, Panel, attention_figure, cell_color,
                                             student_attention, validated)

REPO = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
FIGURES = REPO / "docs" / "figures"


def _parse(markup) -> ET.Element:
    return ET.fromstring(str(markup))  # raises on markup that is not well-formed XML


def _weights(root: ET.Element) -> list[float]:
    return [float(rect.get("data-weight")) for rect in root.iter(f"{SVG}rect") if rect.get("data-weight")]


def _texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def _darkness(color: str) -> int:
    return -sum(int(color[i:i + 2], 16) for i in (1, 3, 5))


def test_every_weight_is_drawn_at_its_place_with_a_colour_that_grows_with_it():
    weights = [[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.1, 0.2, 0.7]]
    root = _parse(attention_figure([Panel(("a", "甲"), weights, ["q0", "q1", "q2"], ["k0", "k1", "k2"])],
                                   ("caption", "说明")))
    cells = {(int(r.get("y")), int(r.get("x"))): r for r in root.iter(f"{SVG}rect") if r.get("data-weight")}
    assert {(y, x): float(r.get("data-weight")) for (y, x), r in cells.items()} == {
        (i, j): weights[i][j] for i in range(3) for j in range(3)}
    assert cells[(0, 0)].get("fill") == cell_color(1.0) and cells[(0, 1)].get("fill") == cell_color(0.0)
    ramp = [_darkness(cell_color(v / 20)) for v in range(21)]
    assert ramp == sorted(ramp) and ramp[0] < ramp[-1]
    # Each small map's cell says which query reads which key, and how much.
    assert "q1 → k1: 0.750" in ["".join(t.itertext()) for t in root.iter(f"{SVG}title")]


def test_labels_and_captions_are_escaped_and_tokens_made_visible():
    evil = '<script>alert("x")</script>&'
    root = _parse(attention_figure([Panel((evil, "标题 & <b>"), [[0.5, 0.5]], [evil], [" ", "\n"])],
                                   (evil, "说明 <i>")))
    texts = _texts(root)
    assert "标题 & <b>" in texts and "说明 <i>" in texts and evil in texts
    assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
    assert "␣" in texts and "↵" in texts  # a space and a newline get a visible label
    assert "<scri…" in texts  # long tokens are cut on the axes (and escaped)


@pytest.mark.parametrize("bad", [
    [], [[]], [[0.1, 0.2], [0.3]], [[float("nan")]], [[float("inf"), 0.0]], [[True]], [["0.5"]],
    [[0.1] * 65], [[0.1]] * 65, "0.5", None,
])
def test_matrices_that_cannot_be_drawn_are_refused(bad):
    with pytest.raises(FigureDataError):
        validated(bad)
    if bad is not None:
        with pytest.raises(FigureDataError):
            attention_figure([Panel(("a", "甲"), bad, ["q"], ["k"])], ("c", "说明"))


def test_labels_must_match_the_matrix():
    with pytest.raises(FigureDataError, match="labels"):
        attention_figure([Panel(("a", "甲"), [[0.5, 0.5]], ["q"], ["k"])], ("c", "说明"))


@pytest.mark.parametrize("student", [None, [[float("nan"), 1.0]], [[1.0]], "not a matrix", [[0.5, 0.5]] * 3])
def test_a_student_matrix_that_cannot_be_drawn_leaves_the_reference_alone_with_a_note(student):
    root = _parse(student_attention(student, [[0.5, 0.5], [0.0, 1.0]], ["q0", "q1"], ["k0", "k1"], ("c", "说明")))
    assert _weights(root) == [0.5, 0.5, 0.0, 1.0]  # the reference's cells only
    assert NO_RESULT[0] in _texts(root) and any("reference's alone" in t for t in _texts(root))


def test_a_student_matrix_is_drawn_beside_the_reference():
    root = _parse(student_attention([[0.9, 0.1], [0.2, 0.8]], [[1.0, 0.0], [0.0, 1.0]], ["a", "b"], ["c", "d"],
                                    ("c", "说明")))
    assert _weights(root) == [0.9, 0.1, 0.2, 0.8, 1.0, 0.0, 0.0, 1.0]
    assert NO_RESULT[0] not in _texts(root)


# --- the probe ----------------------------------------------------------------------------------

def _reference(folder: str, module: str, tmp_path: Path):
    shutil.copytree(REPO / "exercises" / folder, tmp_path / folder)
    shutil.copy(REPO / "solutions" / folder / f"{module}.py", tmp_path / folder / f"{module}.py")
    return load_module(tmp_path / folder, module)


GPT_CONFIG = {"vocab_size": 13, "context_length": 8, "d_model": 16, "num_heads": 2, "num_layers": 2}


def test_gpt_attention_is_the_causal_softmax_of_the_last_block(tmp_path):
    gpt = _reference("12_gpt", "gpt", tmp_path)
    idx = torch.tensor([[3, 1, 4, 1, 5, 9]])
    found = attention_maps.gpt_attention(gpt, GPT_CONFIG, 0, idx)["self_attention"]
    assert found.shape == (6, 6) and found.dtype == torch.float64
    assert torch.allclose(found.sum(dim=-1), torch.ones(6, dtype=torch.float64))
    assert torch.equal(torch.triu(found, diagonal=1), torch.zeros(6, 6, dtype=torch.float64))
    # The last block's, not the first: recompute it from the model's own parts.
    model = gpt.GPT(**GPT_CONFIG)
    attention_maps.load_weights(model, attention_maps.gpt_weights(GPT_CONFIG, 0))
    model.eval()
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb(torch.arange(6))
        x = model.blocks[0](x)
        attn, h = model.blocks[1].attn, model.blocks[1].attn.num_heads
        y = model.blocks[1].norm1(x)
        q = attn.W_query(y).view(1, 6, h, -1).transpose(1, 2)
        k = attn.W_key(y).view(1, 6, h, -1).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(attn.mask[:6, :6], float("-inf"))
        expected = torch.softmax(scores, dim=-1)[0].mean(dim=0).double()
    assert torch.allclose(found, expected, atol=1e-6)


def test_a_softmax_written_by_hand_leaves_nothing_to_record(tmp_path):
    folder = tmp_path / "12_gpt"
    shutil.copytree(REPO / "exercises" / "12_gpt", folder)
    shutil.copy(REPO / "solutions" / "12_gpt" / "gpt.py", folder / "gpt.py")
    source = (folder / "multihead.py").read_text()
    hand_made = "(lambda s: torch.exp(s - s.amax(dim=-1, keepdim=True)) / torch.exp(s - s.amax(dim=-1, keepdim=True)).sum(dim=-1, keepdim=True))"
    assert "weights = torch.softmax(scores, dim=-1)" in source
    (folder / "multihead.py").write_text(
        source.replace("weights = torch.softmax(scores, dim=-1)", f"weights = {hand_made}(scores)"))
    gpt = load_module(folder, "gpt")
    assert "torch.exp" in Path(sys.modules["multihead"].__file__).read_text()
    assert attention_maps.gpt_attention(gpt, GPT_CONFIG, 0, torch.tensor([[1, 2, 3]]))["self_attention"] is None


def test_the_trained_copy_model_attends_along_the_diagonal(tmp_path):
    transformer = _reference("11_transformer", "transformer", tmp_path)
    # The README figure's settings (docs/figures/make_figures.py: COPY).
    found = attention_maps.copy_cross_attention(transformer, seed=7, steps=300, length=8)
    weights = found["cross_attention"]
    assert weights.shape == (9, 8) and found["keys"] == attention_maps.COPY_SOURCE
    # The query that predicts source symbol t puts its largest weight on
    # source position t: all but at most one of them (a 300-step training
    # ends a little differently on another CPU's kernels: here one query
    # splits its weight 0.32 / 0.35 between its position and the one
    # before), and the diagonal holds far more than a uniform 1/8.
    on_diagonal = weights[:8].argmax(dim=-1) == torch.arange(8)
    assert int(on_diagonal.sum()) >= 7
    assert float(weights[:8].diagonal().mean()) > 0.4
    assert found["exact_match"] >= 0.9


def test_the_copy_checks_own_training_gives_the_students_picture(tmp_path):
    """copy_outcome with the figure's source: the same outcome numbers as
    without it (the picture is taken afterwards, from the same model), plus
    the very map that a second training (copy_cross_attention, the check's
    settings) used to give the page, mostly along the diagonal after only
    150 steps."""
    transformer = _reference("11_transformer", "transformer", tmp_path)
    settings = {"seed": 7, "steps": 150, "length": 6}
    plain = copy_task.copy_outcome(transformer, **settings)
    drawn = copy_task.copy_outcome(transformer, **settings, figure_source=[3, 4, 5, 6, 7, 8])
    assert "cross_attention" not in plain
    assert {k: v for k, v in drawn.items() if k not in ("cross_attention", "seconds")} == \
        {k: v for k, v in plain.items() if k != "seconds"}
    weights = drawn["cross_attention"]
    assert weights.shape == (7, 6) and weights.dtype == torch.float64
    assert torch.allclose(weights.sum(dim=-1), torch.ones(7, dtype=torch.float64))
    assert torch.equal(weights, attention_maps.copy_cross_attention(transformer, **settings)["cross_attention"])
    on_diagonal = weights[:6].argmax(dim=-1) == torch.arange(6)
    assert int(on_diagonal.sum()) >= 4 and float(weights[:6].diagonal().mean()) > 2 / 6


class _Untrainable:
    """A stand-in for a trained model whose forward pass goes wrong."""

    def __init__(self, forward) -> None:
        self.forward = forward

    def eval(self) -> "_Untrainable":
        return self

    def __call__(self, src, tgt):
        return self.forward(src, tgt)


def _hand_softmax_attention(src, tgt):
    scores = torch.randn(1, 2, tgt.size(1), src.size(1))
    weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)  # no softmax to record
    return weights @ torch.randn(1, 2, src.size(1), 4)


def _raises(src, tgt):
    raise RuntimeError("boom")


@pytest.mark.parametrize("forward", [_raises, _hand_softmax_attention, lambda src, tgt: torch.softmax(
    torch.randn(1, 2, tgt.size(1), src.size(1) + 1), dim=-1)])  # a softmax of another shape
def test_a_picture_that_cannot_be_taken_is_none_and_changes_no_outcome(forward, monkeypatch):
    trained = {"losses": [0.5] * 30, "exact_match": 0.75, "token_accuracy": 0.9, "seconds": 1.5,
               "model": _Untrainable(forward)}
    monkeypatch.setattr(copy_task, "copy_task", lambda *args, **kwargs: dict(trained))
    plain = copy_task.copy_outcome(object(), seed=7, steps=3, length=6)
    drawn = copy_task.copy_outcome(object(), seed=7, steps=3, length=6, figure_source=[3, 4, 5, 6, 7, 8])
    assert drawn == {**plain, "cross_attention": None}
    assert plain == {"final_loss": 0.5, "exact_match": 0.75, "token_accuracy": 0.9, "seconds": 1.5}


def test_the_recording_helpers_are_shared_not_copied():
    """attention_maps and copy_task both record through attention_record
    (copy_task must not import attention_maps, which imports it)."""
    from coursekit.probes import attention_record

    assert attention_maps.recorded_attention is attention_record.recorded_attention
    assert copy_task.recorded_attention is attention_record.recorded_attention
    assert "attention_maps" not in (REPO / "coursekit" / "probes" / "copy_task.py").read_text()


# --- the committed figures ------------------------------------------------------------------------

FIGURE_NAMES = {"copy_cross_attention.svg", "copy_no_positional_encoding.svg", "gpt_self_attention.svg",
                "sliding_window_reach.svg"}
READMES = {
    "11_transformer": {"copy_cross_attention.svg", "copy_no_positional_encoding.svg"},
    "12_gpt": {"gpt_self_attention.svg"},
    "18_sliding_window": {"sliding_window_reach.svg"},
}


# Figures that are not attention maps, each tested with its own script.
OTHER_FIGURES = {"rope_rotation.svg",                  # exercise 16: tests/test_rope_figure.py
                 "flash_attention_causal_blocks.svg",  # exercise 15: tests/test_flash_figure.py
                 "flash_attention_memory.svg"}         # exercise 15, measured: tests/test_flash_figure.py


def test_the_committed_figures_are_well_formed_and_hold_attention_weights():
    assert {p.name for p in FIGURES.glob("*.svg")} - OTHER_FIGURES == FIGURE_NAMES
    for name in FIGURE_NAMES:
        root = _parse((FIGURES / name).read_text(encoding="utf-8"))
        weights = _weights(root)
        assert weights and all(0.0 <= w <= 1.0 for w in weights), name
        assert any(re.search(r"[\u4e00-\u9fff]", t) for t in _texts(root)), f"{name}: no Chinese caption"


def test_the_ablation_figure_shows_both_accuracies():
    texts = _texts(_parse((FIGURES / "copy_no_positional_encoding.svg").read_text(encoding="utf-8")))
    rates = [int(m) for t in texts for m in re.findall(r"(\d+)% copied", t)]
    assert len(rates) == 2 and rates[0] > rates[1]


@pytest.mark.parametrize("folder", sorted(READMES))
@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_readmes_show_their_figures(folder, readme):
    text = (REPO / "exercises" / folder / readme).read_text(encoding="utf-8")
    shown = set(re.findall(r"!\[[^\]]+\]\(\.\./\.\./docs/figures/([\w.]+\.svg)\)", text))
    assert shown == READMES[folder]
    assert all((FIGURES / name).is_file() for name in shown)


def test_the_figure_script_makes_every_committed_figure(monkeypatch):
    """docs/figures/make_figures.py, shortened (a few training steps): it
    still writes every figure the READMEs show, well-formed. (Its full run,
    ``--check``, compares with the committed bytes: about 20 s.)"""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_figures", FIGURES / "make_figures.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "COPY", {**script.COPY, "steps": 5})
    monkeypatch.setattr(script, "GPT_TRAINING", {**script.GPT_TRAINING, "steps": 3})
    made = script.make_all()
    assert set(made) == FIGURE_NAMES
    for svg in made.values():
        assert _weights(_parse(svg))
    assert "Beautiful is better than ugly." in script.zen_of_python()
