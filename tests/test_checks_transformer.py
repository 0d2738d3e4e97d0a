"""The hidden checks of exercise 11, run in-process (no sandbox): correct
solutions written differently from the reference pass every check, the
hidden inputs cover what the checks claim, and the copy-task comparison
reads training outcomes as intended. ``grader check 11`` covers the
reference, the stub and the pitfall variants through the sandbox."""
from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch

from grader.checks import CheckPlan
from grader.checks import transformer as checks
from grader.checks.forbidden import unwrapped
from grader.course import REPO_ROOT
from probecalls import exercise_module

# Correct, but unlike the reference: layers created in another order,
# padding_idx, a causal mask without the target padding part, an encoder mask
# that also blocks padded queries, the scale on the left, no early stop.
OTHER_ORDER = '''
import torch
import torch.nn.functional as F
from torch import nn
from decoder import Decoder
from encoder import Encoder
from positional_encoding import PositionalEncoding

class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, pad_idx=0):
        super().__init__()
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_idx)
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_idx)
        self.pad_idx, self.d_model, self.scale = pad_idx, d_model, d_model ** 0.5

    def encode(self, src):
        pad = src == self.pad_idx
        return self.encoder(self.pos_encoding(self.scale * self.src_embed(src)), pad[:, None, :] | pad[:, :, None])

    def decode(self, tgt, memory, src):
        pos = torch.arange(tgt.size(1), device=tgt.device)
        x = self.pos_encoding(self.tgt_embed(tgt) * self.scale)
        return self.decoder(x, memory, pos[None, :] > pos[:, None], (src == self.pad_idx)[:, None, None, :])

    def forward(self, src, tgt):
        memory = self.encode(src)
        return self.generator(self.decode(tgt, memory, src))

    @torch.no_grad()
    def greedy_decode(self, src, max_len, start_symbol, end_symbol):
        memory = self.encode(src)
        ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len - 1):
            nxt = F.softmax(self.generator(self.decode(ys, memory, src))[:, -1], dim=-1).argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, self.pad_idx), nxt)
            done = done | (nxt == end_symbol)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
        return ys
'''

# Correct too: forward written inline (the target is embedded before the
# encoder runs, so dropout masks are drawn in another order), a 0-dim tensor
# as the scale, a float mask turned bool, greedy with early stop and torch.cat.
INLINE = '''
import torch
from torch import nn
from decoder import Decoder
from encoder import Encoder
from positional_encoding import PositionalEncoding

class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, pad_idx=0):
        super().__init__()
        self.d_model, self.pad_idx = d_model, pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def _in(self, embed, ids):
        return self.pos_encoding(embed(ids) * torch.sqrt(torch.tensor(float(self.d_model))))

    def make_tgt_mask(self, tgt):
        n = tgt.size(1)
        return torch.ones(n, n, device=tgt.device).triu(1).bool() | (tgt == self.pad_idx).unsqueeze(1)

    def encode(self, src):
        return self.encoder(self._in(self.src_embed, src), (src == self.pad_idx).unsqueeze(1))

    def decode(self, tgt, memory, src):
        return self.decoder(self._in(self.tgt_embed, tgt), memory, self.make_tgt_mask(tgt),
                            (src == self.pad_idx).unsqueeze(1))

    def forward(self, src, tgt):
        y = self._in(self.tgt_embed, tgt)
        memory = self.encoder(self._in(self.src_embed, src), (src == self.pad_idx).unsqueeze(1))
        return self.generator(self.decoder(y, memory, self.make_tgt_mask(tgt), (src == self.pad_idx).unsqueeze(1)))

    @torch.no_grad()
    def greedy_decode(self, src, max_len, start_symbol, end_symbol):
        memory, b = self.encode(src), src.size(0)
        ys = torch.full((b, 1), start_symbol, dtype=torch.long, device=src.device)
        ended = torch.zeros(b, 1, dtype=torch.bool, device=src.device)
        while ys.size(1) < max_len:
            if bool(ended.all()):
                rest = torch.full((b, max_len - ys.size(1)), self.pad_idx, dtype=torch.long, device=src.device)
                return torch.cat([ys, rest], dim=1)
            nxt = self.generator(self.decode(ys, memory, src)[:, -1:]).argmax(-1)
            ys = torch.cat([ys, nxt.masked_fill(ended, self.pad_idx)], dim=1)
            ended |= nxt == end_symbol
        return ys
'''

PLAN = CheckPlan.build(checks.CHECKS)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one thread (tests/conftest.py)."""


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    return exercise_module("11", source, tmp_path_factory.mktemp(name))


def _run(module: ModuleType, check_id: str) -> list[object]:
    values = []
    for call in PLAN.calls[PLAN.slices[check_id]]:
        probe_module, function = call.probe.split(":")
        values.append(getattr(importlib.import_module(probe_module), function)(module, **call.kwargs))
    return values


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module((REPO_ROOT / "solutions" / "11_transformer" / "transformer.py").read_text(), tmp_path_factory, "ref")


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, list[object]]:
    return {check.id: _run(reference, check.id) for check in checks.CHECKS}


@pytest.mark.parametrize("source", [OTHER_ORDER, INLINE], ids=["other-order", "inline"])
def test_correct_solutions_written_differently_pass_every_check(source, reference, expected, tmp_path_factory):
    module = _module(source, tmp_path_factory, "alt")
    for check in checks.CHECKS:
        for got, want in zip(_run(module, check.id), expected[check.id], strict=True):
            assert check.compare(got, want) is None, check.id


def test_hidden_inputs_cover_what_the_checks_claim():
    forward = [unwrapped(c).kwargs for c in PLAN.calls[PLAN.slices["11-forward-logits"]]]
    assert any(k["src"].size(0) == 1 for k in forward)
    assert any(k["src"].size(1) != k["tgt"].size(1) for k in forward)
    assert len({k["config"]["num_heads"] for k in forward}) >= 3
    padded = [unwrapped(c).kwargs for c in PLAN.calls[PLAN.slices["11-padding"]]]
    assert sum(int((k["src"] == k["config"]["pad_idx"]).sum()) for k in padded) >= 10
    assert sum(int((k["tgt"] == k["config"]["pad_idx"]).sum()) for k in padded) >= 5
    assert any(k["config"]["pad_idx"] != 0 for k in padded)


def test_greedy_cases_end_at_different_steps(reference):
    from coursekit.probes.transformer import greedy_output

    steps = []
    for call in map(unwrapped, PLAN.calls[PLAN.slices["11-greedy-decode"]]):
        tokens = greedy_output(reference, **call.kwargs)["tokens"]
        for row in tokens[:, 1:]:
            ends = (row == call.kwargs["end_symbol"]).nonzero()
            steps.append(int(ends[0]) + 1 if len(ends) else None)
    assert None in steps  # a row that never ends
    assert len({s for s in steps if s is not None and s >= 2}) >= 3  # rows that end late, at different steps


def _outcome(loss: float, exact: float) -> dict:
    return {"final_loss": loss, "exact_match": exact, "token_accuracy": 0.0, "seconds": 1.0}


@pytest.mark.parametrize("submitted,expected,agrees", [
    (_outcome(0.05, 0.9), _outcome(0.02, 1.0), True),     # correct: drifts from the reference, well inside
    (_outcome(0.25, 0.55), _outcome(0.02, 1.0), True),    # weaker, still inside the thresholds
    (_outcome(1.80, 0.14), _outcome(0.02, 1.0), False),   # probabilities fed to the loss
    (_outcome(0.02, 0.11), _outcome(0.02, 1.0), False),   # learns, greedy decoding broken
    (_outcome(float("nan"), 0.0), _outcome(0.02, 1.0), False),
    # Against a pitfall variant: alike only on the same shortfall at about the same values.
    (_outcome(1.79, 0.0), _outcome(1.80, 0.14), False),
    (_outcome(1.75, 0.12), _outcome(1.80, 0.14), True),
    (_outcome(0.81, 0.08), _outcome(1.80, 0.14), False),
])
def test_copy_task_outcomes_are_judged_by_thresholds(submitted, expected, agrees):
    assert (checks._learns(submitted, expected) is None) is agrees


@pytest.mark.parametrize("submitted,expected", [
    (_outcome(0.05, 0.9), _outcome(0.02, 1.0)), (_outcome(1.80, 0.14), _outcome(0.02, 1.0)),
    (_outcome(1.75, 0.12), _outcome(1.80, 0.14)), (_outcome(0.81, 0.08), _outcome(1.80, 0.14)),
])
@pytest.mark.parametrize("mine,theirs", [
    (None, torch.eye(7, 6, dtype=torch.float64)), (torch.full((7, 6), 1 / 6), torch.eye(7, 6, dtype=torch.float64)),
    ("not a map", None), (torch.full((7, 6), float("nan")), torch.eye(7, 6, dtype=torch.float64)),
])
def test_the_figures_map_never_changes_the_copy_verdict(submitted, expected, mine, theirs):
    """copy_outcome's cross_attention is a picture, never compared: a result
    that differs only there (or whose picture failed: None) gets the verdict
    it gets without one."""
    verdict = checks._learns(submitted, expected)
    assert checks._learns({**submitted, "cross_attention": mine}, {**expected, "cross_attention": theirs}) == verdict
    assert checks._learns({**submitted, "cross_attention": mine}, expected) == verdict


def test_the_reference_learns_and_stops_early(expected):
    """Training stops once both thresholds hold at two checks in a row
    (copy_task's stop_when): the reference meets them, with room on the
    copying side, before its step budget is spent. (Over 20 seeds, with and
    without stopping: bench/copy_task_reliability.py --hidden.)"""
    (outcome,) = expected["11-copy-task"]
    assert outcome["final_loss"] <= checks.MAX_FINAL_LOSS
    assert outcome["exact_match"] >= checks.MIN_EXACT_MATCH + 0.2
