"""Every worked example of every README, in both languages, recomputed from
the reference solution.

A worked example is a ``>>>`` session in a fenced ``python`` block. Each one
runs as a doctest in a namespace holding the exercise's reference module
(its public names), ``torch``, ``nn``, ``F`` and ``math``. Numbers are
compared to the precision the README prints them with; the rest of the
output must match word for word. A block can be given setup code that the
reader does not need to see, in an HTML comment just above its fence::

    <!-- example setup: model = Transformer(11, 11, d_model=32) -->

(the setup sees the reference module as ``reference_module``), or be left
out, with the reason, when it cannot be recomputed (a model trained for
minutes)::

    <!-- example not checked: the output of a trained model -->

The English and the Chinese README must show the same examples: the same
statements and the same numbers.
"""
from __future__ import annotations

import doctest
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coursekit.loader import load_module
from grader.course import REPO_ROOT, load_course
from grader.intake.submissions import assemble

FENCE = re.compile(r"(?:<!--\s*example (setup|not checked):\s*(.*?)\s*-->\s*\n)?```python\n(.*?)```", re.S)
NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?|nan|-?inf", re.I)


@dataclass(frozen=True)
class Example:
    readme: str
    line: int
    setup: str
    skipped: str
    source: str          # the block as printed

    @property
    def doctest_text(self) -> str:
        """The block for doctest: a blank line inside an output (between the
        heads of a 4-D tensor) is part of it, not the end of the example."""
        return re.sub(r"\n(?=\n)", "\n<BLANKLINE>", self.source.rstrip("\n")) + "\n"

    def statements(self) -> list[str]:
        """The ``>>>`` and ``...`` lines, without their comments (they are translated)."""
        return [re.sub(r"\s+#.*$", "", line).rstrip() for line in self.source.splitlines()
                if line.startswith((">>>", "..."))]


def examples_of(readme: Path) -> list[Example]:
    text = readme.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        kind, note, body = match.groups()
        if ">>>" not in body:
            continue
        found.append(Example(str(readme.relative_to(REPO_ROOT)), text[:match.start(3)].count("\n") + 1,
                             note if kind == "setup" else "", note if kind == "not checked" else "", body))
    return found


def _decimals(token: str) -> int:
    mantissa = token.lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def _as_float(token: str) -> float:
    return float(token.lower().replace("inf", "inf"))


class NumbersToPrecision(doctest.OutputChecker):
    """Text equal once numbers are masked; each number equal to the
    precision the README prints it with (half a unit of its last digit)."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        want = re.sub(r"[ \t]+#[^\n]*", "", want)            # a README comment on an output line
        want = re.sub(r",\s*grad_fn=(?:\.\.\.|<\w+>)", "", want)  # "grad_fn=..." stands for any grad_fn
        got = re.sub(r",\s*grad_fn=<\w+>", "", got)
        if super().check_output(want, got, optionflags | doctest.NORMALIZE_WHITESPACE):
            return True
        skeleton = lambda s: " ".join(NUMBER.sub("#", s).split())  # noqa: E731
        if skeleton(want) != skeleton(got):
            return False
        for w, g in zip(NUMBER.findall(want), NUMBER.findall(got)):
            expected, value = _as_float(w), _as_float(g)
            if math.isnan(expected) or math.isinf(expected):
                if not (math.isnan(value) and math.isnan(expected) or value == expected):
                    return False
            elif abs(value - expected) > 0.5 * 10 ** -_decimals(w) + 1e-9 * abs(expected):
                return False
        return True


READMES = sorted(REPO_ROOT.glob("exercises/*/README.md"))
EXAMPLES = [example for readme in READMES for language in ("README.md", "README.zh.md")
            for example in examples_of(readme.parent / language)]


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, object]:
    """Each exercise's reference module, in a folder with the modules it ships."""
    course = load_course(check_files=False)
    loaded = {}
    for exercise in course.exercises:
        source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
        folder = assemble(exercise, source, tmp_path_factory.mktemp(exercise.id), course, REPO_ROOT)
        loaded[exercise.folder] = load_module(folder, exercise.module)
    return loaded


def test_every_readme_has_worked_examples_in_both_languages():
    assert len(EXAMPLES) >= 20
    for readme in READMES:
        english, chinese = examples_of(readme), examples_of(readme.parent / "README.zh.md")
        assert [e.statements() for e in english] == [e.statements() for e in chinese], readme.parent.name
        assert [NUMBER.findall(e.source.split(">>>", 1)[1]) for e in english] == \
               [NUMBER.findall(e.source.split(">>>", 1)[1]) for e in chinese], f"{readme.parent.name}: numbers differ"
        assert [e.setup for e in english] == [e.setup for e in chinese]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"{e.readme}:{e.line}")
def test_the_worked_example_matches_the_reference(example, references):
    if example.skipped:
        pytest.skip(example.skipped)
    module = references[Path(example.readme).parent.name]
    namespace = {name: value for name, value in vars(module).items() if not name.startswith("_")}
    namespace.update(torch=torch, nn=nn, F=F, math=math, reference_module=module)
    torch.manual_seed(0)
    if example.setup:
        exec(example.setup, namespace)  # noqa: S102 - the repository's own README
    test = doctest.DocTestParser().get_doctest(example.doctest_text, namespace, example.readme, example.readme,
                                               example.line)
    failures = []
    runner = doctest.DocTestRunner(checker=NumbersToPrecision(), optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)


# Numbers quoted in the READMEs' prose, outside the >>> blocks: the text as
# printed, and how to recompute it from the references (or from PyTorch).
JOURNEY_SCORES = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
BOOK_INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                            [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


def _count(module: nn.Module) -> str:
    return f"{sum(p.numel() for p in module.parameters()):,}"


def _row(values: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(v):.4f}" for v in values) + "]"


PROSE = {
    "01_softmax": lambda ref: [_row(JOURNEY_SCORES / JOURNEY_SCORES.sum()), _row(ref.softmax(JOURNEY_SCORES))],
    "02_attention_weights": lambda ref: [_row(ref.attention_scores(BOOK_INPUTS)[1] / ref.attention_scores(BOOK_INPUTS)[1].sum()),
                                         _row(ref.attention_weights(ref.attention_scores(BOOK_INPUTS))[1])],
    "06_multihead": lambda ref: [_count(ref.MultiHeadAttention(768, 768, 1024, 0.0, 12)),
                                 _count(ref.MultiHeadAttention(768, 768, 1024, 0.0, 12, qkv_bias=True)),
                                 _count(ref.MultiHeadAttentionWrapper(768, 64, 1024, 0.0, 12))],
    "08_transformer_layers": lambda ref: [_row(torch.softmax(torch.tensor([0.0, 2 ** -0.5]), dim=-1))],
    "09_encoder": lambda ref: [_count(ref.EncoderLayer(512, 8, 2048)), _count(nn.TransformerEncoderLayer(512, 8, 2048))],
    "10_decoder": lambda ref: [_count(ref.DecoderLayer(512, 8, 2048)), _count(nn.TransformerDecoderLayer(512, 8, 2048))],
}


@pytest.mark.parametrize("folder", sorted(PROSE))
def test_numbers_quoted_in_the_prose_match_the_reference(folder, references):
    with torch.no_grad():
        quoted = PROSE[folder](references[folder])
    for language in ("README.md", "README.zh.md"):
        text = (REPO_ROOT / "exercises" / folder / language).read_text(encoding="utf-8")
        missing = [number for number in quoted if number not in text]
        assert missing == [], f"{folder}/{language} does not show the reference's {missing}"
