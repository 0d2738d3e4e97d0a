"""Training tests (exercises 11 and 13) run only when asked for, so that
`pytest exercises/NN` stays about a second beyond importing torch; nothing
a student needs is lost by that: the progress table says what did not run
and how to run it, and every pitfall's hint comes from a quick test
(grader/proofs/selftest.py checks that per variant, tests/test_exercises.py
asserts it)."""
import json
import os
import subprocess
import sys

from grader.course import REPO_ROOT
from grader.proofs.public_runs import Case, CaseResult
from grader.proofs.selftest import variant_problems

TRAINING_TESTS = {
    "exercises/11_transformer/test_transformer_training.py::test_a_tiny_transformer_learns_to_copy",
    "exercises/13_training/test_training_learns.py::test_a_tiny_gpt_learns_python_source",
}


def public_run(tmp_path, *args: str) -> tuple[str, list[dict]]:
    """`pytest ARGS` from the repository root, as a student runs it (on the
    untouched stubs: every test that runs fails at once as not implemented)."""
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=REPO_ROOT,
                          env={**os.environ, "COURSEKIT_REPORT": str(report)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, json.loads(report.read_text(encoding="utf-8"))


def test_training_tests_run_only_when_asked_for(tmp_path):
    # 11's folder plain; 13's training file named on the command line.
    output, outcomes = public_run(tmp_path, "exercises/11_transformer", "exercises/13_training",
                                  "exercises/13_training/test_training_learns.py")
    by_id = {o["nodeid"]: o for o in outcomes}
    copy, learns = sorted(TRAINING_TESTS)
    assert by_id[copy]["outcome"] == "skipped" and by_id[copy]["training_not_run"]
    assert by_id[learns]["outcome"] == "failed" and by_id[learns]["not_implemented"]
    assert {o["nodeid"] for o in outcomes if o["training"]} == TRAINING_TESTS
    quick = [o for o in outcomes if not o["training"]]
    assert len(quick) > 30 and all(o["outcome"] == "failed" and o["not_implemented"] for o in quick)
    # The progress table does not count it and says how to run it.
    progress = output.split("progress", 1)[1]
    assert "1 training test not run: pytest exercises/11_transformer --train" in progress
    assert "exercises/13_training --train" not in progress
    assert "  0/19  passed" in progress


def test_train_runs_every_training_test(tmp_path):
    output, outcomes = public_run(tmp_path, "exercises/11_transformer", "exercises/13_training", "--train")
    training = {o["nodeid"]: o for o in outcomes if o["training"]}
    assert set(training) == TRAINING_TESTS
    assert all(o["outcome"] == "failed" and o["not_implemented"] for o in training.values())
    assert "not run" not in output


def test_a_keyword_that_selects_only_training_tests_asks_for_them(tmp_path):
    copy = sorted(TRAINING_TESTS)[0]
    _, outcomes = public_run(tmp_path, "exercises/11_transformer", "-k", "copy")
    assert [(o["nodeid"], o["outcome"], o["not_implemented"]) for o in outcomes] == [(copy, "failed", True)]
    # With another test beside it, the training test still waits for --train.
    output, outcomes = public_run(tmp_path, "exercises/11_transformer", "-k", "copy or padded")
    assert {o["nodeid"]: o["training_not_run"] for o in outcomes if o["training"]} == {copy: True}
    assert "1 training test not run" in output


def _case_result(tests: list[dict]) -> CaseResult:
    return CaseResult(Case("11-variant-x", None), tests)  # type: ignore[arg-type]


def test_a_hint_shown_only_by_a_training_test_is_a_problem_of_the_course():
    only_training = _case_result([
        {"nodeid": "a", "outcome": "failed", "pitfalls": ["softmax-before-loss"], "training": True},
        {"nodeid": "b", "outcome": "failed", "pitfalls": [], "training": False},
    ])
    assert variant_problems(only_training, "softmax-before-loss") == [
        "variant softmax-before-loss: only a training test shows its hint, and `pytest exercises/NN` "
        "runs those only with --train"]
    also_quick = _case_result([
        {"nodeid": "a", "outcome": "failed", "pitfalls": ["softmax-before-loss"], "training": True},
        {"nodeid": "b", "outcome": "failed", "pitfalls": ["softmax-before-loss"], "training": False},
    ])
    assert variant_problems(also_quick, "softmax-before-loss") == []


def test_the_option_survives_the_plugin_loaded_twice(tmp_path):
    """exercises/conftest.py imports the plugin; `-p coursekit.pytest_plugin`
    loads it again: --train is added once, not an error."""
    output, outcomes = public_run(tmp_path, "-p", "coursekit.pytest_plugin", "exercises/11_transformer", "--train")
    assert "already added" not in output
    assert any(o["training"] and o["outcome"] == "failed" for o in outcomes)
