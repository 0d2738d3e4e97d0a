"""course.yaml validation: the real file is valid, and each kind of mistake
is reported with the field path it concerns."""
import shutil
import subprocess
import sys

import pytest
import yaml

from grader.course import REPO_ROOT, CourseError, load_course


def test_the_course_file_is_valid(course):
    assert [e.id for e in course.exercises] == sorted(e.id for e in course.exercises)
    assert all(course.pitfall(p.id) for e in course.exercises for p in e.pitfalls)


def test_validate_command_succeeds_on_the_course():
    run = subprocess.run([sys.executable, "-m", "grader", "validate"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr
    assert "ok" in run.stdout


@pytest.fixture
def course_copy(tmp_path):
    """A writable copy of the repository's course files."""
    for name in ("exercises", "solutions"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "grader" / "pitfalls", tmp_path / "grader" / "pitfalls")
    data = yaml.safe_load((REPO_ROOT / "course.yaml").read_text(encoding="utf-8"))
    return tmp_path, data


def _problems(tmp_path, data):
    path = tmp_path / "course.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(CourseError) as info:
        load_course(path)
    return info.value.problems


def test_missing_field_is_named(course_copy):
    tmp_path, data = course_copy
    del data["exercises"][0]["points"]
    assert ("exercises[0].points", "Field required") in _problems(tmp_path, data)


def test_unknown_key_is_named(course_copy):
    tmp_path, data = course_copy
    data["exercises"][1]["pionts"] = 3
    assert [w for w, _ in _problems(tmp_path, data)] == ["exercises[1].pionts"]


def test_wrong_type_is_named_with_the_value(course_copy):
    tmp_path, data = course_copy
    data["grading"]["timeout_s"] = "soon"
    (where, message), = _problems(tmp_path, data)
    assert where == "grading.timeout_s" and "'soon'" in message


def test_unknown_pitfall_is_named(course_copy):
    tmp_path, data = course_copy
    data["exercises"][0]["pitfalls"][0]["id"] = "softmax-overflw"
    assert ("exercises[0].pitfalls[0].id", "unknown pitfall 'softmax-overflw'") in _problems(tmp_path, data)


def test_assignment_with_unknown_exercise_is_named(course_copy):
    tmp_path, data = course_copy
    data["assignments"][0]["exercises"].append("42")
    where, message = _problems(tmp_path, data)[-1]
    assert where.startswith("assignments[0].exercises[") and "'42'" in message


def test_a_shipped_solution_from_the_same_assignment_is_refused(course_copy):
    """06 ships 05's reference: with both in assignment 1, students would
    get 05's solution while 05 is still due."""
    tmp_path, data = course_copy
    data["assignments"][0]["exercises"].append("06")
    data["assignments"][1]["exercises"].remove("06")
    (where, message), = _problems(tmp_path, data)
    assert where == "exercises[5].ships[0]" and "'05' is in assignment 'attention'" in message
    assert "before its deadline" in message


def test_an_exercise_in_two_assignments_is_named(course_copy):
    tmp_path, data = course_copy
    data["assignments"][1]["exercises"].append("01")
    (where, message), = _problems(tmp_path, data)
    assert where == "assignments[1].exercises[3]" and "already in assignment 'attention'" in message


def test_invalid_error_pattern_is_named(course_copy):
    tmp_path, data = course_copy
    data["pitfalls"][0]["error_patterns"] = ["(unclosed"]
    (where, message), = _problems(tmp_path, data)
    assert where == "pitfalls[0].error_patterns" and "invalid regular expression" in message


def test_missing_module_file_is_named(course_copy):
    tmp_path, data = course_copy
    (tmp_path / "solutions" / "01_softmax" / "softmax.py").unlink()
    problems = _problems(tmp_path, data)
    assert ("exercises[0].module", "solutions/01_softmax/softmax.py does not exist") in problems


def test_variant_whose_edit_no_longer_applies_is_an_error(course_copy):
    tmp_path, data = course_copy
    reference = tmp_path / "solutions" / "01_softmax" / "softmax.py"
    reference.write_text(reference.read_text().replace("exp = torch.exp(x - row_max)", "exp = (x - row_max).exp()"))
    (where, message), = _problems(tmp_path, data)
    assert where == "exercises[0].pitfalls" and "softmax-overflow" in message and "0 times" in message


def test_broken_yaml_names_the_line(tmp_path):
    path = tmp_path / "course.yaml"
    path.write_text("course:\n  id: [unclosed\n", encoding="utf-8")
    with pytest.raises(CourseError) as info:
        load_course(path)
    (where, message), = info.value.problems
    assert where.startswith("line ") and "not valid YAML" in message
