"""The students' repository: what it holds, that nothing of the instructor's
side is in it, and that its public tests run from a fresh copy."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from grader.cli import app
from grader.course import REPO_ROOT, load_course
from grader.release.common import ReleaseError
from grader.release.student_repo import find_leaks, hidden_check_ids, secret_lines, write_student_repo

EXERCISES = ["01_softmax", "02_attention_weights", "04_self_attention"]


@pytest.fixture(scope="module")
def course():
    return load_course(check_files=False)


@pytest.fixture(scope="module")
def released(tmp_path_factory, course):
    pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")
    out = tmp_path_factory.mktemp("student-repo")
    write_student_repo(course, REPO_ROOT, out)
    return out


def test_layout(released):
    for folder in EXERCISES:
        names = {p.name for p in (released / "exercises" / folder).iterdir()}
        assert {"README.md", "README.zh.md", f"{folder}.ipynb"} <= names
        assert any(n.startswith("test_") for n in names)
    assert (released / "exercises" / "conftest.py").is_file()
    assert (released / "coursekit" / "pytest_plugin.py").is_file()
    assert (released / "coursekit" / "notebook.py").is_file()
    assert not list(released.rglob("__pycache__"))
    assert not (released / "solutions").exists() and not (released / "grader").exists()
    for name in ("pyproject.toml", "requirements.txt"):
        assert "torch==2.13.0" in (released / name).read_text()
    requirements = (released / "requirements.txt").read_text().split()
    assert requirements == ["torch==2.13.0", "numpy", "pytest", "pyyaml"]
    assert "01_softmax" in (released / "README.md").read_text()


def test_course_file_holds_only_what_students_need(released, course):
    data = yaml.safe_load((released / "course.yaml").read_text())
    assert set(data) == {"schema_version", "course", "pitfalls", "exercises"}
    present = [e.id for e in course.exercises if (REPO_ROOT / "exercises" / e.folder / e.module).is_file()]
    assert [e["id"] for e in data["exercises"]] == present
    assert set(data["exercises"][0]) == {"id", "slug", "part", "module", "symbols", "points", "title", "forbidden", "pitfalls"}
    assert all(set(p) <= {"id", "hint", "error_patterns"} for p in data["pitfalls"])
    text = (released / "course.yaml").read_text()
    for secret in ("assignments:", "grading:", "hidden_only", "release:", "timeout_s", "source:"):
        assert secret not in text


def test_nothing_of_the_instructors_side_is_released(released, course):
    secrets = secret_lines(course, REPO_ROOT)
    # The search looks for something: every reference and variant file has distinctive lines.
    present = [e for e in course.exercises if (REPO_ROOT / "solutions" / e.folder / e.module).is_file()
               and (REPO_ROOT / "exercises" / e.folder / e.module).is_file()]
    shipped = {i for e in course.exercises for i in e.ships}
    expected = {f"solutions/{e.folder}/{e.module}" for e in present if e.id not in shipped}
    expected |= {f"grader/pitfalls/{e.folder}.yaml" for e in present
                 if (REPO_ROOT / "grader" / "pitfalls" / f"{e.folder}.yaml").is_file()}
    assert set(secrets) == expected and all(secrets.values())
    assert hidden_check_ids(REPO_ROOT)
    assert find_leaks(released, course, REPO_ROOT) == []


def test_leak_search_finds_planted_leaks(tmp_path, released, course):
    tree = tmp_path / "tree"
    shutil.copytree(released, tree)
    reference_line = secret_lines(course, REPO_ROOT)["solutions/01_softmax/softmax.py"][-1]
    variant_line = secret_lines(course, REPO_ROOT)["grader/pitfalls/04_self_attention.yaml"][0]
    check_id = hidden_check_ids(REPO_ROOT)[0]
    readme = tree / "exercises" / "01_softmax" / "README.md"
    readme.write_text(readme.read_text() + f"\n    {reference_line}\n")
    (tree / "notes.txt").write_text(f"{variant_line}\ncheck {check_id}\n")
    (tree / "grader").mkdir()
    leaks = find_leaks(tree, course, REPO_ROOT)
    assert any("README.md: line of solutions/01_softmax/softmax.py" in leak for leak in leaks)
    assert any("notes.txt: line of grader/pitfalls/04_self_attention.yaml" in leak for leak in leaks)
    assert any(f"notes.txt: hidden check id {check_id!r}" in leak for leak in leaks)
    assert "grader/: instructor-only folder" in leaks


def test_public_tests_run_in_the_released_tree_and_fail_as_not_implemented(released, tmp_path):
    report = tmp_path / "report.json"
    # Nothing of this checkout on the path: the released tree must stand alone.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_YAML")}
    env["COURSEKIT_REPORT"] = str(report)
    done = subprocess.run([sys.executable, "-m", "pytest", "exercises/01_softmax", "-p", "no:cacheprovider"],
                          cwd=released, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "not implemented yet" in done.stdout and "progress" in done.stdout
    outcomes = json.loads(report.read_text())
    assert len(outcomes) >= 10
    assert all(o["outcome"] == "failed" and o["not_implemented"] for o in outcomes)
    assert all(o["folder"].startswith(str(released)) for o in outcomes)
    origin = subprocess.run([sys.executable, "-c", "import coursekit.pytest_plugin as p; print(p.__file__)"],
                            cwd=released / "exercises", env={**env, "PYTHONPATH": str(released)},
                            capture_output=True, text=True, timeout=60)
    assert origin.stdout.strip().startswith(str(released))


def test_cli_writes_refuses_to_overwrite_and_replaces_with_force(tmp_path):
    pytest.importorskip("nbformat")
    out = tmp_path / "students"
    runner = CliRunner()
    result = runner.invoke(app, ["release", "student", str(out), "--no-notebooks"])
    assert result.exit_code == 2 and "--through attention" in result.output and not out.exists()
    result = runner.invoke(app, ["release", "student", str(out), "--no-notebooks", "--through", "all"])
    assert result.exit_code == 0, result.output
    assert "no leak found" in result.output and not list(out.rglob("*.ipynb"))
    # The release is a git repository with a first commit, its tree clean (issue 34, item 10).
    log = lambda: subprocess.run(["git", "-C", str(out), "log", "--format=%an %s"], capture_output=True,  # noqa: E731
                                 text=True).stdout.splitlines()
    assert len(log()) == 1 and log()[0].startswith("course staff Release of")
    assert subprocess.run(["git", "-C", str(out), "status", "--porcelain"], capture_output=True, text=True).stdout == ""
    readme = (out / "README.md").read_text()
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme and "CUDA" in readme
    result = runner.invoke(app, ["release", "student", str(out), "--through", "all"])
    assert result.exit_code == 1 and "is not empty" in result.output
    result = runner.invoke(app, ["release", "student", str(out), "--force", "--through", "all"])
    assert result.exit_code == 0 and (out / ".git").is_dir() and list(out.rglob("*.ipynb"))
    assert len(log()) == 2                                   # the new release is the next commit, history kept


def test_a_release_through_an_assignment_ships_no_open_solution(tmp_path, course):
    """Assignment 1 (01-05) alone: 06, which ships 05's reference, is not in
    it, and the leak search, told what was released, catches 05's solution
    if it gets in anyway (through 06's folder, say)."""
    out = tmp_path / "release"
    written = write_student_repo(course, REPO_ROOT, out, notebooks=False, through="attention")
    assert [e.id for e in written] == ["01", "02", "03", "04", "05"]
    assert sorted(p.name for p in (out / "exercises").iterdir() if p.is_dir()) == [e.folder for e in written]
    assert find_leaks(out, course, REPO_ROOT, written) == []
    shutil.copytree(REPO_ROOT / "exercises" / "06_multihead", out / "exercises" / "06_multihead")
    leaks = find_leaks(out, course, REPO_ROOT, written)
    assert any("06_multihead/causal_attention.py: line of solutions/05_causal_attention/" in leak for leak in leaks)
    later = write_student_repo(course, REPO_ROOT, tmp_path / "later", notebooks=False, through="layers")
    assert [e.id for e in later][-3:] == ["06", "07", "08"]
    assert find_leaks(tmp_path / "later", course, REPO_ROOT, later) == []   # 05 is over: its solution may ship


def test_release_without_exercises_is_an_error(tmp_path, course):
    empty_root = tmp_path / "root"
    (empty_root / "exercises").mkdir(parents=True)
    with pytest.raises(ReleaseError, match="no exercise has a stub"):
        write_student_repo(course, empty_root, tmp_path / "out")


def test_the_released_tree_runs_training_tests_only_with_train(released, tmp_path):
    """`pytest` alone (testpaths) skips exercises 11 and 13's training tests
    and says how to run them; `pytest --train` runs them; the mark is known."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_YAML")}
    for extra, ran in (([], False), (["--train"], True)):
        report = tmp_path / f"report{len(extra)}.json"
        done = subprocess.run([sys.executable, "-m", "pytest", *extra, "-p", "no:cacheprovider",
                               "-W", "error::pytest.PytestUnknownMarkWarning"],
                              cwd=released, env={**env, "COURSEKIT_REPORT": str(report)},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        training = [o for o in json.loads(report.read_text()) if o["training"]]
        assert len(training) == 2
        if ran:
            assert all(o["outcome"] == "failed" and o["not_implemented"] for o in training)
            assert "training test not run" not in done.stdout
        else:
            assert all(o["outcome"] == "skipped" and o["training_not_run"] for o in training)
            assert "training test not run: pytest exercises/13_training --train" in done.stdout


def test_the_kit_ships_stored_values_and_no_oracle(released, tmp_path):
    """Issue 36: the student kit holds no function that computes a graded
    answer (the oracles of 09-10, 12 and 13 stay in grader/); the public tests
    read stored values, which ship in coursekit and load in the released tree."""
    kit = released / "coursekit"
    for name in ("gpt_12", "encoder_09", "decoder_10", "training_13"):
        assert (kit / "fixtures" / f"{name}.py").is_file(), name
    assert not (kit / "probes" / "torch_oracles.py").exists()
    oracles = ("oracle_logits", "oracle_block", "torch_block", "torch_encoder_layer", "torch_decoder_layer",
               "run_encoder_layers", "run_decoder_layers", "oracle_steps", "oracle_estimate", "oracle_probs",
               "oracle_sample")
    defined = [f"{p.relative_to(kit)}: {line.strip()}" for p in kit.rglob("*.py")
               for line in p.read_text(encoding="utf-8").splitlines()
               if line.lstrip().startswith("def ") and any(f"def {n}(" in line for n in oracles)]
    assert defined == []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_YAML")}
    done = subprocess.run([sys.executable, "-c", "from coursekit.fixtures import load; print(len(load('gpt_12')))"],
                          cwd=released, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and int(done.stdout) > 10, done.stderr[-2000:]
