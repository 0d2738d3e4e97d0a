"""Public ⊆ hidden, proved by running (issue 31): what a public test catches,
the hidden checks it is mapped to (tests/coverage/public_to_hidden.yaml)
catch too. Each pitfall variant and each labelled-bad submission of the
accuracy corpus (tests/accuracy/NN/bug_*.py) runs through the exercise's
public tests and through the judge: for every public test it fails, at
least one of that test's hidden checks loses its points.

A sample runs in CI (SAMPLE, about a minute: a few of 01's cases, and the
13 submissions where a hidden check once passed what the public test
caught, and where a public test failed nanoGPT's float32 losses); every case of
every exercise with ``GRADER_PUBLIC_HIDDEN_SWEEP=1`` (tens of minutes here:
each case is graded on its own hidden inputs).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from accuracy.test_accuracy import ENTRIES
from grader.course import REPO_ROOT
from grader.course.pitfalls import load_variants
from grader.intake.submissions import assemble
from grader.proofs.public_runs import Case, run_cases

TABLE = yaml.safe_load((Path(__file__).parent / "coverage" / "public_to_hidden.yaml").read_text(encoding="utf-8"))
SAMPLE = {"01": {"01-variant-softmax-overflow", "01-variant-softmax-dim0", "01-bug_ignores_dim"},
          "13": {"13-bug_no_eval_after_last_step", "13-bug_temperature_not_checked"}}
SWEEP = os.environ.get("GRADER_PUBLIC_HIDDEN_SWEEP") == "1"


def _cases(course, exercise_id: str) -> list[Case]:
    exercise = course.exercise(exercise_id)
    cases = [Case(f"{exercise_id}-variant-{pitfall_id}", exercise, {exercise.module: variant.source})
             for pitfall_id, variant in sorted(load_variants(exercise, REPO_ROOT).items())]
    cases += [Case(f"{exercise_id}-{entry.path.stem}", exercise, {exercise.module: entry.path.read_text(encoding="utf-8")})
              for entry in ENTRIES if entry.exercise_id == exercise_id and entry.label["expect"] == "loses"]
    return cases


def _test_name(nodeid: str) -> str:
    return nodeid.split("::")[-1].split("[")[0]


@pytest.mark.parametrize("exercise_id", [e for e in sorted(TABLE) if SWEEP or e in SAMPLE])
def test_what_a_public_test_catches_a_hidden_check_catches(course, judge, tmp_path, exercise_id):
    exercise = course.exercise(exercise_id)
    chosen = None if SWEEP else SAMPLE[exercise_id]
    cases = [case for case in _cases(course, exercise_id) if chosen is None or case.name in chosen]
    assert cases
    public = run_cases(cases, tmp_path / "public", workers=1)
    missed, caught = [], 0
    for case in cases:
        failed = {_test_name(t["nodeid"]) for t in public[case.name].failed}
        mapped = {test: TABLE[exercise_id][test] for test in failed if isinstance(TABLE[exercise_id].get(test), list)}
        if not mapped:
            continue
        folder = assemble(exercise, case.files[exercise.module].encode(), tmp_path / case.name / "submission", course)
        result = judge.grade(exercise, folder, tmp_path / case.name / "work")
        lost = {v.check_id for v in result.verdicts if v.points < v.max_points - 1e-9}
        for test, checks in sorted(mapped.items()):
            if lost & set(checks):
                caught += 1
            else:
                missed.append((case.name, test, checks))
    assert caught, "no public failure to hold the hidden checks to"
    assert not missed, missed
