"""How reliable exercise 11's copy-task test is: the reference, and the two
pitfall variants it must fail, trained over many seeds.

    python bench/copy_task_reliability.py [--seeds 20] [--variants pe-added-twice softmax-before-loss]

For each seed, ``copy_task`` (the probe the public test and the hidden check
share) trains the model from ``solutions/11_transformer`` or a pitfall
variant of it, and the public test's thresholds (imported from the test
file, not copied) decide pass or fail. Prints the pass count and the
training time per seed. The reference should pass every seed, each variant
none.
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from coursekit.loader import load_module  # noqa: E402
from coursekit.probes.copy_task import copy_task  # noqa: E402
from grader.course import load_course  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402

EXERCISE = "11"


def public_test_thresholds() -> tuple[int, float, float]:
    """STEPS, MIN_EXACT_MATCH and MAX_FINAL_LOSS of the public test itself."""
    path = REPO / "exercises" / "11_transformer" / "test_transformer_training.py"
    spec = importlib.util.spec_from_file_location("copy_test_thresholds", path)
    test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test)
    return test.STEPS, test.MIN_EXACT_MATCH, test.MAX_FINAL_LOSS


def folder_with(source: str | None, exercise, work: Path, label: str) -> Path:
    """A copy of the exercise folder (with the modules it ships) whose
    module is the reference, or ``source`` when given."""
    folder = work / label
    shutil.copytree(REPO / "exercises" / exercise.folder, folder)
    reference = REPO / "solutions" / exercise.folder / exercise.module
    (folder / exercise.module).write_text(source if source is not None else reference.read_text(encoding="utf-8"),
                                          encoding="utf-8")
    return folder


def run_seeds(folder: Path, module_name: str, seeds: range) -> list[tuple[bool, float, float, float]]:
    steps, min_exact, max_loss = public_test_thresholds()
    module = load_module(folder, module_name.removesuffix(".py"))
    rows = []
    for seed in seeds:
        started = time.perf_counter()
        result = copy_task(module, seed=seed, steps=steps)
        seconds = time.perf_counter() - started
        final_loss = sum(result["losses"][-20:]) / 20
        passed = final_loss <= max_loss and result["exact_match"] >= min_exact
        rows.append((passed, final_loss, result["exact_match"], seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--variants", nargs="*", default=["pe-added-twice", "softmax-before-loss"])
    args = parser.parse_args()
    course = load_course(REPO / "course.yaml")
    exercise = course.exercise(EXERCISE)
    variants = load_variants(exercise, REPO)
    seeds = range(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subjects = [("reference", None)] + [(v, variants[v].source) for v in args.variants]
        for label, source in subjects:
            rows = run_seeds(folder_with(source, exercise, work, label), exercise.module, seeds)
            passed = sum(row[0] for row in rows)
            times = [row[3] for row in rows]
            print(f"{label:22s} passed {passed:2d}/{len(rows)} seeds; "
                  f"final loss {min(r[1] for r in rows):.3f}..{max(r[1] for r in rows):.3f}; "
                  f"exact match {min(r[2] for r in rows):.0%}..{max(r[2] for r in rows):.0%}; "
                  f"seconds per seed: median {statistics.median(times):.2f}, max {max(times):.2f}")


if __name__ == "__main__":
    main()
