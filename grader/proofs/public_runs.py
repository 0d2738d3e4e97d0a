"""Run an exercise's public tests against other code than the student's:
the reference, the untouched stub, or a pitfall variant.

Each case is a copy of ``exercises/NN_slug/`` with some files replaced.
All cases go through one pytest process per worker (torch is imported once,
not once per case), and each test's outcome and hint ids come back through
the course plugin's JSON report.

This runs trusted code only (our references and variants); student
submissions are graded in the sandbox, never here.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.course.pitfalls import load_variants

PYTEST_INI = """[pytest]
addopts = --import-mode=importlib -p no:hypothesispytest -p no:cacheprovider
"""


@dataclass(frozen=True)
class Case:
    """The public tests of ``exercise`` run with ``files`` (name -> source)
    written over the exercise folder's own files."""

    name: str
    exercise: Exercise
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class CaseResult:
    case: Case
    tests: list[dict]  # the plugin's Outcome records

    @property
    def failed(self) -> list[dict]:
        return [t for t in self.tests if t["outcome"] == "failed"]

    @property
    def hint_ids(self) -> set[str]:
        return {p for t in self.failed for p in t["pitfalls"]}

    @property
    def quick_hint_ids(self) -> set[str]:
        """Hints shown by failed tests other than the training tests (which
        `pytest exercises/NN` runs only with --train)."""
        return {p for t in self.failed if not t.get("training") for p in t["pitfalls"]}


def standard_cases(course: Course, exercise: Exercise, root: Path = REPO_ROOT) -> list[Case]:
    """Reference, untouched stub and every pitfall variant of ``exercise``."""
    reference = (root / "solutions" / exercise.folder).glob("*.py")
    cases = [
        Case(f"{exercise.id}-reference", exercise, {p.name: p.read_text(encoding="utf-8") for p in reference}),
        Case(f"{exercise.id}-stub", exercise, {}),
    ]
    for pitfall_id, variant in sorted(load_variants(exercise, root).items()):
        cases.append(Case(f"{exercise.id}-variant-{pitfall_id}", exercise, {exercise.module: variant.source}))
    return cases


def _materialise(case: Case, workdir: Path, root: Path) -> Path:
    target = workdir / case.name / case.exercise.folder
    shutil.copytree(root / "exercises" / case.exercise.folder, target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in case.files.items():
        (target / name).write_text(source, encoding="utf-8")
    return target


def _run_batch(cases: list[Case], workdir: Path, root: Path, timeout_s: float) -> dict[str, list[dict]]:
    workdir.mkdir(parents=True)
    shutil.copy(root / "exercises" / "conftest.py", workdir / "conftest.py")
    (workdir / "pytest.ini").write_text(PYTEST_INI)
    folders = {str(_materialise(case, workdir, root)): case.name for case in cases}
    report = workdir / "report.json"
    # PYTHONPATH: the coursekit of this checkout, even if another one is installed.
    env = {**os.environ, "COURSEKIT_REPORT": str(report), "COURSE_YAML": str(root / "course.yaml"),
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--train", str(workdir)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
    )
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report for {sorted(folders.values())}:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    by_case: dict[str, list[dict]] = {name: [] for name in folders.values()}
    for outcome in json.loads(report.read_text(encoding="utf-8")):
        by_case[folders[outcome["folder"]]].append(outcome)
    return by_case


def run_cases(cases: list[Case], workdir: Path, *, root: Path = REPO_ROOT,
              workers: int = 2, timeout_s: float = 900) -> dict[str, CaseResult]:
    """Run every case's public tests; ``workers`` pytest processes in parallel."""
    batches = [cases[i::workers] for i in range(workers) if cases[i::workers]]
    with ThreadPoolExecutor(len(batches)) as pool:
        futures = [pool.submit(_run_batch, batch, workdir / f"batch{i}", root, timeout_s)
                   for i, batch in enumerate(batches)]
        outcomes = {}
        for future in futures:
            outcomes.update(future.result())
    return {case.name: CaseResult(case, outcomes[case.name]) for case in cases}
