"""Every public assertion has a hidden counterpart (issue 31): the table
tests/coverage/public_to_hidden.yaml names, for each public test function,
the hidden checks that cover it. This test holds the table to the code:
each public test of a listed exercise is in it (a new public test needs
its hidden counterpart named), each named check exists, and an exemption
says why."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from grader.checks import checks_for
from grader.course import REPO_ROOT, load_course

TABLE = yaml.safe_load((Path(__file__).parent / "coverage" / "public_to_hidden.yaml").read_text(encoding="utf-8"))
COURSE = load_course(check_files=False)


def public_tests(exercise) -> set[str]:
    """The test functions of the exercise's public test files, read with ast."""
    names = set()
    for path in sorted((REPO_ROOT / "exercises" / exercise.folder).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    return names


@pytest.mark.parametrize("exercise_id", sorted(TABLE))
def test_every_public_test_names_its_hidden_checks(exercise_id):
    exercise = COURSE.exercise(exercise_id)
    table = TABLE[exercise_id]
    assert set(table) == public_tests(exercise), (sorted(public_tests(exercise) - set(table)),
                                                  sorted(set(table) - public_tests(exercise)))
    check_ids = {check.id for check in checks_for(exercise)}
    for test, covered in table.items():
        if isinstance(covered, dict):
            assert set(covered) == {"exempt"} and covered["exempt"].strip(), test
            continue
        assert covered and set(covered) <= check_ids, (test, sorted(set(covered) - check_ids))


def test_the_table_covers_every_exercise():
    assert set(TABLE) == {exercise.id for exercise in COURSE.exercises}
