"""How reliable exercise 13's learning test is: the reference, and pitfall
variants it must fail, trained over many seeds on the standard library's source.

    python bench/training_reliability.py [--seeds 20] [--variants targets-not-shifted zero-grad-forgotten]

For each seed, ``learns_text`` (the probe the public test uses) trains the
shipped GPT with ``train`` from ``solutions/13_training`` or a pitfall
variant of it, and the public test's threshold (imported from the test
file, not copied) decides pass or fail. Prints the pass count, the range of
held-out losses, and the training time per seed. The reference should
pass every seed, targets-not-shifted none. zero-grad-forgotten is here to
show why its public test is a unit test of train_step: with AdamW, whose
steps do not grow with the gradient, leftover gradients act like heavy
momentum and the model still learns (it passed 16 of 20 seeds when this
was written). Also prints the two baselines the
README compares with, measured on the same held-out text: a uniform guess
(log 96) and the character frequencies of the training text (unigram).
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from coursekit.loader import load_module  # noqa: E402
from coursekit.probes.corpus import VOCAB, splits  # noqa: E402
from coursekit.probes.training import learns_text  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402

EXERCISE = "13"


def public_test_threshold() -> float:
    """MAX_HELDOUT_LOSS of the public test itself."""
    path = REPO / "exercises" / "13_training" / "test_training_learns.py"
    spec = importlib.util.spec_from_file_location("training_test_threshold", path)
    test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test)
    return test.MAX_HELDOUT_LOSS


def folder_with(source: str | None, exercise, work: Path, label: str) -> Path:
    """A copy of the exercise folder (with the modules it ships) whose
    module is the reference, or ``source`` when given."""
    folder = work / label
    shutil.copytree(REPO / "exercises" / exercise.folder, folder)
    reference = REPO / "solutions" / exercise.folder / exercise.module
    (folder / exercise.module).write_text(source if source is not None else reference.read_text(encoding="utf-8"),
                                          encoding="utf-8")
    return folder


def run_seeds(folder: Path, module_name: str, seeds: range) -> list[tuple[bool, float, float]]:
    """(passed, held-out loss, seconds of training) per seed."""
    threshold = public_test_threshold()
    module = load_module(folder, module_name.removesuffix(".py"))
    gpt = load_module(folder, "gpt")
    rows = []
    for seed in seeds:
        result = learns_text(module, gpt, seed=seed)
        rows.append((result["heldout"] <= threshold, result["heldout"], result["seconds"]))
    return rows


def baselines() -> tuple[float, float]:
    """(uniform, unigram) cross-entropy of the held-out text, in nats per character."""
    train_data, val_data = splits()
    counts = Counter(train_data.tolist())
    total = len(train_data) + len(VOCAB)   # add-one smoothing: every character possible
    unigram = -sum(math.log((counts[t] + 1) / total) for t in val_data.tolist()) / len(val_data)
    return math.log(len(VOCAB)), unigram


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--variants", nargs="*", default=["targets-not-shifted", "zero-grad-forgotten"])
    args = parser.parse_args()
    course = load_course(REPO / "course.yaml")
    exercise = course.exercise(EXERCISE)
    variants = load_variants(exercise, REPO)
    uniform, unigram = baselines()
    print(f"held-out baselines: uniform {uniform:.3f}, unigram {unigram:.3f} nats per character; "
          f"threshold {public_test_threshold()}")
    seeds = range(args.seeds)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subjects = [("reference", None)] + [(v, variants[v].source) for v in args.variants]
        for label, source in subjects:
            rows = run_seeds(folder_with(source, exercise, work, label), exercise.module, seeds)
            passed = sum(row[0] for row in rows)
            times = [row[2] for row in rows]
            print(f"{label:22s} passed {passed:2d}/{len(rows)} seeds; "
                  f"held-out loss {min(r[1] for r in rows):.3f}..{max(r[1] for r in rows):.3f}; "
                  f"seconds per seed: median {statistics.median(times):.2f}, max {max(times):.2f}", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
