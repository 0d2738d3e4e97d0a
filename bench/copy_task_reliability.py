"""How reliable exercise 11's copy-task test is: the reference, and the two
pitfall variants it must fail, trained over many seeds.

    python bench/copy_task_reliability.py [--seeds 20] [--variants pe-added-twice softmax-before-loss] [--hidden]

For each seed, ``copy_task`` (the probe the public test and the hidden check
share) trains the model from ``solutions/11_transformer`` or a pitfall
variant of it, and the public test's thresholds (imported from the test
file, not copied) decide pass or fail. Prints the pass count and the
training time per seed. The reference should pass every seed, each variant
none. ``--hidden``: the hidden check's settings instead, trained in full and
stopped early (its ``stop_when``) one after the other, with the time of each:
early stopping must change no verdict.
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


def run_seeds(folder: Path, module_name: str, seeds: range, hidden: str | None = None) -> list[tuple]:
    """(passed, final loss, exact match, seconds, steps trained) per seed:
    the public test's settings, or with ``hidden`` the hidden check's
    ("full": all its steps; "early": stopped as the check stops it)."""
    module = load_module(folder, module_name.removesuffix(".py"))
    if hidden is None:
        steps, min_exact, max_loss = public_test_thresholds()
        settings = {"steps": steps}
    else:
        from grader.checks.transformer import COPY, MAX_FINAL_LOSS, MIN_EXACT_MATCH

        min_exact, max_loss = MIN_EXACT_MATCH, MAX_FINAL_LOSS
        settings = {k: v for k, v in COPY.items() if k != "seed"}
        if hidden == "early":
            settings["stop_when"] = (max_loss, min_exact)
    rows = []
    for seed in seeds:
        started = time.perf_counter()
        result = copy_task(module, seed=seed, **settings)
        seconds = time.perf_counter() - started
        final_loss = sum(result["losses"][-20:]) / 20
        passed = final_loss <= max_loss and result["exact_match"] >= min_exact
        rows.append((passed, final_loss, result["exact_match"], seconds, len(result["losses"])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--variants", nargs="*", default=["pe-added-twice", "softmax-before-loss"])
    parser.add_argument("--hidden", action="store_true",
                        help="the hidden check's settings, trained in full and stopped early, side by side")
    args = parser.parse_args()
    course = load_course(REPO / "course.yaml")
    exercise = course.exercise(EXERCISE)
    variants = load_variants(exercise, REPO)
    seeds = range(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subjects = [("reference", None)] + [(v, variants[v].source) for v in args.variants]
        modes = ["full", "early"] if args.hidden else [None]
        for label, source in subjects:
            folder = folder_with(source, exercise, work, label)
            for mode in modes:
                rows = run_seeds(folder, exercise.module, seeds, mode)
                passed = sum(row[0] for row in rows)
                times = [row[3] for row in rows]
                name = label if mode is None else f"{label} ({mode})"
                print(f"{name:30s} passed {passed:2d}/{len(rows)} seeds; "
                      f"final loss {min(r[1] for r in rows):.3f}..{max(r[1] for r in rows):.3f}; "
                      f"exact match {min(r[2] for r in rows):.0%}..{max(r[2] for r in rows):.0%}; "
                      f"steps {min(r[4] for r in rows)}..{max(r[4] for r in rows)}; "
                      f"seconds per seed: median {statistics.median(times):.2f}, total {sum(times):.1f}")


if __name__ == "__main__":
    main()
