"""The course's promise about its public tests, checked per exercise:

- the reference passes every public test;
- the untouched stub fails every one of them with "not implemented"
  (and never with a collection error);
- every pitfall variant fails at least one public test that shows the
  pitfall's own hint, unless ``course.yaml`` marks it ``hidden_only``;
  a quick one, not only a training test (those run only with --train).

``grader selftest`` prints this; ``tests/test_exercises.py`` asserts it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.course import REPO_ROOT, Course, Exercise
from grader.proofs.public_runs import CaseResult, run_cases, standard_cases

MIN_PUBLIC_TESTS = 5


def reference_problems(reference: CaseResult) -> list[str]:
    problems = []
    if len(reference.tests) < MIN_PUBLIC_TESTS:
        problems.append(f"only {len(reference.tests)} public tests ran (at least {MIN_PUBLIC_TESTS} expected)")
    problems += [f"reference fails {t['nodeid']}: {t['message']}" for t in reference.failed]
    return problems


def _test_names(result: CaseResult) -> list[str]:
    # Node ids start with the case's own folder; compare what follows it.
    return sorted(t["nodeid"].split("/", 1)[1] for t in result.tests)


def stub_problems(stub: CaseResult, reference: CaseResult) -> list[str]:
    problems = []
    if _test_names(stub) != _test_names(reference):
        problems.append(f"the stub ran {len(stub.tests)} tests, the reference {len(reference.tests)}: a collection or setup error?")
    problems += [
        f"stub: {t['nodeid']} {t['outcome']} ({t['message'] or 'no message'}) instead of failing as not implemented"
        for t in stub.tests if t["outcome"] != "failed" or not t["not_implemented"]
    ]
    return problems


def variant_problems(variant: CaseResult, pitfall_id: str) -> list[str]:
    if not variant.failed:
        return [f"variant {pitfall_id}: every public test passes"]
    if pitfall_id not in variant.hint_ids:
        return [f"variant {pitfall_id}: {len(variant.failed)} test(s) fail but none shows its hint "
                f"(hints shown: {', '.join(sorted(variant.hint_ids)) or 'none'})"]
    if pitfall_id not in variant.quick_hint_ids:
        return [f"variant {pitfall_id}: only a training test shows its hint, and `pytest exercises/NN` "
                "runs those only with --train"]
    return []


@dataclass
class ExerciseReport:
    exercise: Exercise
    reference: list[str]
    stub: list[str]
    variants: dict[str, list[str]]  # pitfall id -> problems
    hidden_only: dict[str, str] = field(default_factory=dict)  # pitfall id -> reason

    @property
    def problems(self) -> list[str]:
        return self.reference + self.stub + [p for ps in self.variants.values() for p in ps]


def check_exercises(course: Course, exercises: list[Exercise], workdir: Path,
                    root: Path = REPO_ROOT) -> list[ExerciseReport]:
    """Run reference, stub and variants of each exercise through its public tests."""
    cases = [case for exercise in exercises for case in standard_cases(course, exercise, root)]
    results = run_cases(cases, workdir, root=root)
    reports = []
    for exercise in exercises:
        reference = results[f"{exercise.id}-reference"]
        stub = results[f"{exercise.id}-stub"]
        variants, hidden = {}, {}
        for entry in exercise.pitfalls:
            if entry.hidden_only:
                hidden[entry.id] = entry.hidden_only
                variants[entry.id] = []
            else:
                variants[entry.id] = variant_problems(results[f"{exercise.id}-variant-{entry.id}"], entry.id)
        reports.append(ExerciseReport(exercise, reference_problems(reference), stub_problems(stub, reference),
                                      variants, hidden))
    return reports
