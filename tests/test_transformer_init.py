"""Exercise 11's reference trains with the initialisation its own
``__init__`` gives it, the way README 11 tells students to train their
model, not only with the weights the tests' probe writes into it.

README 11 teaches the paper's embedding init, N(0, 1/d_model), which the
``sqrt(d_model)`` factor brings to entries of size about 1. With PyTorch's
default N(0, 1) the same model stalls on the copy task; the last test shows
it, so that the first one can fail.
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest
import torch

from coursekit.loader import load_module
from coursekit.probes.copy_task import copy_task
from grader.course import load_course
from grader.intake.submissions import assemble

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE = REPO_ROOT / "solutions" / "11_transformer" / "transformer.py"
SEEDS = (0, 1, 2)  # measured once over seeds 0-9: all pass (README 11, "The copy task")
PAPER_INIT = """        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, mean=0.0, std=d_model ** -0.5)
"""


def _public_thresholds() -> tuple[int, float, float]:
    """STEPS, MIN_EXACT_MATCH and MAX_FINAL_LOSS of the public training test itself."""
    path = REPO_ROOT / "exercises" / "11_transformer" / "test_transformer_training.py"
    spec = importlib.util.spec_from_file_location("copy_test_thresholds", path)
    test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test)
    return test.STEPS, test.MIN_EXACT_MATCH, test.MAX_FINAL_LOSS


def _module(source: str, tmp_path_factory: pytest.TempPathFactory, name: str) -> ModuleType:
    course = load_course(check_files=False)
    exercise = course.exercise("11")
    folder = assemble(exercise, source.encode(), tmp_path_factory.mktemp(name), course, REPO_ROOT)
    return load_module(folder, exercise.module)


def _learns(module: ModuleType, seed: int) -> tuple[bool, str]:
    steps, min_exact, max_loss = _public_thresholds()
    result = copy_task(module, seed=seed, steps=steps, own_init=True)
    final_loss = sum(result["losses"][-20:]) / 20
    return (final_loss <= max_loss and result["exact_match"] >= min_exact,
            f"seed {seed}: final loss {final_loss:.3f}, {result['exact_match']:.0%} copied exactly")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ModuleType:
    return _module(REFERENCE.read_text(encoding="utf-8"), tmp_path_factory, "ref")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_scaled_embeddings_start_at_the_size_of_the_positional_encoding(reference):
    d_model = 256
    model = reference.Transformer(1000, 1000, d_model=d_model, num_heads=4, num_encoder_layers=1,
                                  num_decoder_layers=1, d_ff=64)
    for table in (model.src_embed.weight, model.tgt_embed.weight):
        scaled_rms = float(table.detach().pow(2).mean().sqrt()) * math.sqrt(d_model)
        assert 0.95 < scaled_rms < 1.05, f"sqrt(d_model) * embedding has RMS {scaled_rms:.3f}, expected about 1"


def test_the_reference_learns_to_copy_with_its_own_init(reference):
    outcomes = [_learns(reference, seed) for seed in SEEDS]
    assert all(passed for passed, _ in outcomes), "; ".join(line for _, line in outcomes)


def test_with_pytorchs_default_embedding_init_the_same_model_stalls(tmp_path_factory):
    source = REFERENCE.read_text(encoding="utf-8")
    assert PAPER_INIT in source, "the reference no longer initialises its embeddings as this test expects"
    default_init = _module(source.replace(PAPER_INIT, ""), tmp_path_factory, "default-init")
    passed, line = _learns(default_init, SEEDS[0])
    assert not passed, f"expected the N(0, 1) embedding init to stall the copy task, but {line}"
