"""Exercises as notebooks: the notebook test runner (coursekit.notebook),
reading the answer cell back (grader.intake.notebooks), and `grader grade`'s
collection accepting notebooks in place of modules."""
from __future__ import annotations

import copy
import io
import json
import linecache
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")

from coursekit.notebook import PublicTestFailed, expand_cases  # noqa: E402
from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.intake.notebooks import NotebookError, answer_from_notebook  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.release.common import answer_cell_id  # noqa: E402
from grader.release.notebooks import build_notebook, public_tests_source  # noqa: E402
from grader.intake.submissions import collect  # noqa: E402

EXERCISES = ["01", "02", "04"]


@pytest.fixture(scope="module")
def course():
    return load_course(check_files=False)


def _source(kind: str, exercise) -> str:
    side = "solutions" if kind == "reference" else "exercises"
    return (REPO_ROOT / side / exercise.folder / exercise.module).read_text()


class FakeKernel:
    """Cells run as IPython runs them: each under its own file name, with
    its source in linecache (what the runner reads for source probes)."""

    def __init__(self):
        self.namespace: dict = {"__name__": "__main__"}
        self.count = 0

    def run(self, source: str) -> str:
        self.count += 1
        filename = f"/tmp/ipykernel_fake/cell{self.count}.py"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        out = io.StringIO()
        with redirect_stdout(out):
            exec(compile(source, filename, "exec"), self.namespace)  # noqa: S102 - our own test code
        return out.getvalue()


def _kernel_with(course, exercise_id: str, answer: str) -> tuple[FakeKernel, object]:
    exercise = course.exercise(exercise_id)
    kernel = FakeKernel()
    kernel.run(answer)
    kernel.run(public_tests_source(course, exercise, REPO_ROOT))
    return kernel, kernel.namespace[f"tests_{exercise_id}"]


@pytest.mark.parametrize("exercise_id", [e.id for e in load_course(check_files=False).exercises])
def test_reference_passes_every_test_cell(course, exercise_id, tmp_path, monkeypatch):
    """Every exercise, in a folder that holds what its notebook is released
    with (the modules it ships), as the kernel runs there: a probe that
    looked for a shipped module beside the answer's file found nothing
    (the answer's file is a copy in a temporary folder)."""
    from grader.release.nbgrader import copy_shipped

    exercise = course.exercise(exercise_id)
    copy_shipped(course, exercise, REPO_ROOT, tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))   # the kernel's '' entry
    # A kernel starts with none of the course's modules imported; this pytest
    # process may hold another folder's (a variant's multihead answered 12's
    # `from multihead import ...` in one CI run).
    for shipped in tmp_path.glob("*.py"):
        monkeypatch.delitem(sys.modules, shipped.stem, raising=False)
    kernel, tests = _kernel_with(course, exercise_id, _source("reference", exercise))
    for name in tests.names():
        kernel.run(f"tests_{exercise_id}.run({name!r}, globals())")


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_stub_fails_every_test_cell_as_not_implemented(course, exercise_id):
    kernel, tests = _kernel_with(course, exercise_id, _source("stub", course.exercise(exercise_id)))
    for name in tests.names():
        with pytest.raises(PublicTestFailed):
            kernel.run(f"tests_{exercise_id}.run({name!r}, globals())")
        outcomes = list(tests.outcomes(name, kernel.namespace))
        assert all(o.not_implemented for o in outcomes if o.status == "failed"), name


def test_variant_fails_with_its_hint(course):
    variant = load_variants(course.exercise("01"), REPO_ROOT)["softmax-overflow"].source
    kernel, tests = _kernel_with(course, "01", variant)
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(PublicTestFailed):
        tests.run("test_large_scores_do_not_overflow", kernel.namespace)
    assert "hint [softmax-overflow]" in out.getvalue()
    assert course.pitfall("softmax-overflow").hint.zh in out.getvalue()


def test_error_patterns_give_hints_too(course):
    variant = load_variants(course.exercise("04"), REPO_ROOT)["missing-super-init"].source
    kernel, tests = _kernel_with(course, "04", variant)
    outcomes = list(tests.outcomes("test_has_three_linear_projections", kernel.namespace))
    assert all("missing-super-init" in o.pitfalls for o in outcomes)


def test_forbidden_call_in_the_answer_cell_is_seen(course):
    answer = "import torch\n\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim=dim)\n"
    kernel, tests = _kernel_with(course, "01", answer)
    (outcome,) = tests.outcomes("test_uses_no_builtin_softmax", kernel.namespace)
    assert outcome.status == "failed" and "softmax on line 4" in outcome.message


def test_answer_not_run_says_so(course):
    kernel = FakeKernel()
    kernel.run(public_tests_source(course, course.exercise("01"), REPO_ROOT))
    (outcome,) = kernel.namespace["tests_01"].outcomes("test_matches_torch_on_a_vector", kernel.namespace)
    assert "softmax not defined: run the answer cell above first" in outcome.message


def test_test_helpers_stay_out_of_the_notebook_namespace(course):
    kernel, _ = _kernel_with(course, "04", _source("reference", course.exercise("04")))
    assert not {"randn", "INPUTS", "V1_OUTPUT", "test_seed_example_v1"} & set(kernel.namespace)


def test_parametrize_cases_and_ids(course):
    kernel, tests = _kernel_with(course, "01", _source("reference", course.exercise("01")))
    assert [c.id for c in expand_cases(tests.tests["test_dim_argument_on_a_3d_input"])] == ["0", "1", "2", "-1"]
    kernel, tests = _kernel_with(course, "04", _source("reference", course.exercise("04")))
    cases = expand_cases(tests.tests["test_matches_pytorch_attention"])
    assert [c.id for c in cases] == ["small", "bias", "large_scores"]
    assert cases[2].params == {"batch": 2, "n": 6, "d_in": 16, "d_out": 16, "qkv_bias": False, "scale": 3.0}


# --- reading the answer cell back -------------------------------------------------

def _student_notebook(course, exercise_id: str) -> dict:
    notebook = build_notebook(course, course.exercise(exercise_id), REPO_ROOT, with_solution=False)
    return json.loads(nbformat.writes(notebook))


def _answer_cell(notebook: dict, exercise) -> dict:
    (cell,) = [c for c in notebook["cells"] if c["metadata"]["nbgrader"]["grade_id"] == answer_cell_id(exercise)]
    return cell


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_student_notebook_answer_is_the_stub(course, exercise_id):
    exercise = course.exercise(exercise_id)
    data = json.dumps(_student_notebook(course, exercise_id)).encode()
    assert answer_from_notebook(data, exercise) == _source("stub", exercise)


def test_answer_source_as_list_of_lines_and_ipython_lines(course):
    exercise = course.exercise("01")
    notebook = _student_notebook(course, "01")
    _answer_cell(notebook, exercise)["source"] = ["%load_ext autoreload\n", "import torch\n", "!pip list\n", "x = 1"]
    module = answer_from_notebook(json.dumps(notebook).encode(), exercise)
    assert module.splitlines()[1:3] == ["import torch", "# (IPython only, ignored by the grader) !pip list"]
    compile(module, "softmax.py", "exec")


def _broken(course, how: str) -> bytes:
    exercise = course.exercise("01")
    notebook = _student_notebook(course, "01")
    if how == "invalid JSON":
        return json.dumps(notebook).encode()[:-40]
    if how == "not a notebook":
        return b"[1, 2, 3]"
    if how == "old format":
        notebook["nbformat"] = 3
    if how == "metadata stripped":
        for cell in notebook["cells"]:
            cell["metadata"] = {}
    if how == "answer deleted":
        notebook["cells"].remove(_answer_cell(notebook, exercise))
    if how == "answer duplicated":
        notebook["cells"].append(copy.deepcopy(_answer_cell(notebook, exercise)))
    if how == "answer made markdown":
        _answer_cell(notebook, exercise)["cell_type"] = "markdown"
    if how == "source not text":
        _answer_cell(notebook, exercise)["source"] = 42
    return json.dumps(notebook).encode()


@pytest.mark.parametrize("how,message", [
    ("invalid JSON", "broken JSON at line"),
    ("not a notebook", "not a Jupyter notebook"),
    ("old format", "notebook format 3"),
    ("metadata stripped", "lost their metadata"),
    ("answer deleted", "no answer cell 'ex01_answer'"),
    ("answer duplicated", "'ex01_answer' 2 times"),
    ("answer made markdown", "no longer a code answer cell"),
    ("source not text", "neither text nor a list of lines"),
])
def test_broken_notebooks_give_a_clear_problem(course, how, message):
    with pytest.raises(NotebookError, match=message):
        answer_from_notebook(_broken(course, how), course.exercise("01"), "01_softmax.ipynb")


# --- grader grade's collection ----------------------------------------------------

def _write_notebook(path: Path, course, exercise_id: str, answer: str | None = None, raw: bytes | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = _student_notebook(course, exercise_id)
    if answer is not None:
        _answer_cell(notebook, course.exercise(exercise_id))["source"] = answer
    path.write_bytes(raw if raw is not None else json.dumps(notebook).encode())


def test_collect_reads_nbgrader_plain_and_checkout_notebooks(tmp_path, course):
    exercises = [course.exercise(i) for i in EXERCISES]
    reference = {e.id: _source("reference", e) for e in exercises}
    subs = tmp_path / "submitted"
    for e in exercises:  # nbgrader: submitted/<student>/<assignment>/NN_slug.ipynb
        _write_notebook(subs / "alice" / "attention" / f"{e.folder}.ipynb", course, e.id, reference[e.id])
    _write_notebook(subs / "bob" / "01_softmax.ipynb", course, "01", reference["01"])  # plain notebook
    # A checkout: the module is the untouched stub, the student worked in the notebook.
    carol = subs / "carol" / "exercises" / "01_softmax"
    carol.mkdir(parents=True)
    (carol / "softmax.py").write_text(_source("stub", exercises[0]))
    _write_notebook(carol / "01_softmax.ipynb", course, "01", reference["01"])
    # Both edited: the module is what the student meant.
    dave = subs / "dave" / "01_softmax"
    dave.mkdir(parents=True)
    (dave / "softmax.py").write_text(reference["01"])
    _write_notebook(dave / "01_softmax.ipynb", course, "01", "def softmax(x, dim=-1):\n    return x\n")
    _write_notebook(subs / "erin" / "attention" / "01_softmax.ipynb", course, "01", raw=b"{not json")

    found = {s.student: s for s in collect(subs, course, exercises, tmp_path / "work")}
    for e in exercises:
        part = found["alice"].exercises[e.id]
        assert (part.folder / e.module).read_text() == reference[e.id]
    hashes = {found[s].exercises["01"].content_hash for s in ("alice", "bob", "carol", "dave")}
    assert len(hashes) == 1, "the same code must get the same gradebook key, notebook or module"
    assert found["bob"].exercises["02"].problem == "not submitted"
    erin = found["erin"].exercises["01"]
    assert erin.folder is None and "01_softmax.ipynb is not a valid notebook" in erin.problem
