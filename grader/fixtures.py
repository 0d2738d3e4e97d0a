"""The public tests' stored expected values (coursekit/fixtures), made on
the instructor's side from the references in solutions/.

A public test may compare with stored values or with PyTorch modules that
the grader's forbidden-call detection catches, never with a function of the
student kit that computes the graded answer (issue 36). Each fixture is
built by running the reference (loaded here, in the instructor's process)
on the public test's own inputs (its case functions, read from the test
module so both stay in step), plus the values of the mistakes the test
names, from the trusted side's oracle.

``python scripts/make_fixtures.py`` rewrites them; tests/test_fixtures.py
fails when the stored values no longer equal what this builds.
"""
from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from coursekit.fixtures import render
from coursekit.loader import load_module
from grader.course import REPO_ROOT, Course, load_course
from grader.fixtures_layers import decoder_10, encoder_09
from grader.fixtures_rope import rope_16
from grader.fixtures_sliding_window import sliding_window_18
from grader.intake.submissions import assemble

Values = dict[str, torch.Tensor]


def _public_tests(exercise_folder: str, name: str, root: Path) -> ModuleType:
    """The public test module, imported for its case functions only."""
    path = root / "exercises" / exercise_folder / name
    spec = importlib.util.spec_from_file_location(f"_public_{exercise_folder}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(course: Course, exercise_id: str, root: Path, folder: Path) -> ModuleType:
    exercise = course.exercise(exercise_id)
    source = (root / "solutions" / exercise.folder / exercise.module).read_bytes()
    return load_module(assemble(exercise, source, folder, course, root), exercise.module)


@torch.no_grad()
def gpt_12(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 12: the reference's block outputs, logits and eval-mode
    logits on the public inputs; the oracle's other arrangements, logits
    without the final norm and with late positions, for the diagnoses."""
    from coursekit.probes import gpt as probes
    from grader import gpt_oracle as oracle

    values: Values = {}
    for case in tests.BLOCK_CASES:
        key, config, seed, x = tests.block_case(*case)
        values[f"{key} pre-norm"] = probes.block_output(reference, config, seed, x)["output"]
        weights = probes.block_weights(config, seed)
        for arrangement, _ in tests.BLOCK_MISTAKES:
            values[f"{key} {arrangement}"] = oracle.oracle_block(config, weights, x, arrangement)
    for name in tests.LOGIT_CONFIGS:
        config, seed, idx = tests.logits_case(name)
        values[f"logits {name}"] = probes.logits(reference, config, seed, idx)["logits"]
        values[f"logits {name} no-final-norm"] = oracle.oracle_logits(config, probes.gpt_weights(config, seed), idx,
                                                                      final_norm=False)
    for n in tests.SHORT_LENGTHS:
        config, seed, idx = tests.short_case(n)
        values[f"positions {n}"] = probes.logits(reference, config, seed, idx)["logits"]
        values[f"positions {n} late"] = oracle.oracle_logits(config, probes.gpt_weights(config, seed), idx,
                                                             first_position=config["context_length"] - n)
    config, seed, idx = tests.dropout_case()
    modes = probes.dropout_modes(reference, config, seed, idx)
    values["dropout eval"], values["dropout train fixed"] = modes["eval"], modes["train_fixed"]
    return values


@torch.no_grad()
def training_13(reference: ModuleType, tests: ModuleType) -> Values:
    """Exercise 13: the reference's losses and parameters after each
    train_step, its estimate_loss, and what its generate feeds the model and
    hands torch.multinomial, on the public inputs; the oracle's parameters
    when the gradients are never cleared, for the diagnosis."""
    from coursekit.probes import sampling
    from coursekit.probes import training as probes
    from grader import training_oracle as oracle

    values: Values = {}

    def parameters(key: str, after: list[dict[str, torch.Tensor]]) -> None:
        values.update({f"{key} parameters {i} {name}": t for i, step in enumerate(after) for name, t in step.items()})

    for key, (config, seed, batches, lr, clip) in tests.step_cases().items():
        with torch.enable_grad():
            found = probes.steps(reference, config, seed, batches, lr, clip)
            values[f"{key} losses"] = found["losses"]
            parameters(key, found["parameters"])
            accumulated = oracle.oracle_steps(config, seed, batches, lr, clip, accumulate=True)
            parameters(f"{key} accumulated", accumulated["parameters"])
    values["estimate"] = probes.estimate(reference, *tests.estimate_case())["loss"]
    for case in tests.SAMPLE_CASES:
        vocab, context, seed, n, new, temperature, top_k = case
        idx, key = tests.sample_prompt(vocab, seed, n), tests.sample_key(case)
        found = sampling.sample(reference, vocab, context, seed, idx, new, temperature, top_k)
        values[f"{key} out"], values[f"{key} probs"] = found["out"], found["probs"]
        values[f"{key} lengths"] = torch.tensor(found["lengths"])
        untempered = sampling.sample(reference, vocab, context, seed, idx, new, 1.0, None)
        values[f"{key} untempered probs"] = untempered["probs"]
    return values


# name -> (exercise id, public test file, builder)
FIXTURES: dict[str, tuple[str, str, Callable[[ModuleType, ModuleType], Values]]] = {
    "gpt_12": ("12", "test_gpt.py", gpt_12),
    "encoder_09": ("09", "test_encoder.py", encoder_09),
    "decoder_10": ("10", "test_decoder.py", decoder_10),
    "training_13": ("13", "test_training.py", training_13),
    "rope_16": ("16", "test_rope.py", rope_16),
    "sliding_window_18": ("18", "test_sliding_window.py", sliding_window_18),
}


def build(name: str, root: Path = REPO_ROOT) -> Values:
    """What fixture ``name`` must hold now, from the reference."""
    exercise_id, test_file, builder = FIXTURES[name]
    course = load_course(check_files=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order wherever it is built
    try:
        with tempfile.TemporaryDirectory(prefix=f"fixture-{name}-") as folder:
            reference = _reference(course, exercise_id, root, Path(folder))
            return builder(reference, _public_tests(course.exercise(exercise_id).folder, test_file, root))
    finally:
        torch.set_num_threads(threads)


def write(name: str, root: Path = REPO_ROOT) -> Path:
    """Rewrite ``coursekit/fixtures/<name>.py`` from the reference."""
    path = root / "coursekit" / "fixtures" / f"{name}.py"
    path.write_text(render(build(name, root), "scripts/make_fixtures.py"), encoding="utf-8")
    return path
