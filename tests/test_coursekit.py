"""The student-side library: loading exercise modules in isolation and
comparing tensors without being fooled."""
import re

import torch

from coursekit.compare import compare_tensors
from coursekit.loader import ExerciseImportError, load_module

import pytest


def test_same_named_modules_of_two_folders_do_not_shadow_each_other(tmp_path):
    for name, value in (("08_a", 8), ("09_b", 9)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "layers.py").write_text(f"VALUE = {value}\n")
        (folder / "encoder.py").write_text("from layers import VALUE\n")
    first = load_module(tmp_path / "08_a", "encoder")
    second = load_module(tmp_path / "09_b", "encoder")
    assert (first.VALUE, second.VALUE) == (8, 9)


def test_syntax_error_is_reported_with_its_line(tmp_path):
    (tmp_path / "softmax.py").write_text("def softmax(x:\n    return x\n")
    with pytest.raises(ExerciseImportError, match=r"syntax error on line \d"):
        load_module(tmp_path, "softmax")


def test_missing_module_is_reported(tmp_path):
    with pytest.raises(ExerciseImportError, match="softmax.py is missing"):
        load_module(tmp_path, "softmax")


def test_compare_accepts_equal_tensors_with_matching_inf_and_nan():
    x = torch.tensor([1.0, float("-inf"), float("nan")])
    assert compare_tensors(x.clone(), x) is None


@pytest.mark.parametrize(
    "actual,kind",
    [
        (torch.zeros(2, 3), "shape"),
        (torch.zeros(3, 2, dtype=torch.float64), "dtype"),
        (torch.tensor([[0.0, float("nan")], [0.0, 0.0], [0.0, 0.0]]), "nan"),
        (torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), "values"),
        ([[0.0, 0.0]] * 3, "type"),
    ],
)
def test_compare_reports_the_kind_of_mismatch(actual, kind):
    mismatch = compare_tensors(actual, torch.zeros(3, 2))
    assert mismatch is not None and mismatch.kind == kind


def test_compare_rejects_a_tensor_subclass_that_claims_equality():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

    liar = torch.ones(2).as_subclass(Liar)
    mismatch = compare_tensors(liar, torch.zeros(2))
    assert mismatch is not None and mismatch.kind == "type"


def test_values_mismatch_names_index_and_size():
    mismatch = compare_tensors(torch.tensor([0.0, 0.5, 0.0]), torch.zeros(3))
    assert mismatch.index == (1,) and mismatch.max_abs_diff == pytest.approx(0.5)


def test_a_misspelled_function_gets_one_line_not_a_traceback(tmp_path):
    """pytest exercises/01_softmax on a module whose function is misspelled."""
    import shutil
    import subprocess
    import sys

    from grader.course import REPO_ROOT

    folder = tmp_path / "01_softmax"
    shutil.copytree(REPO_ROOT / "exercises" / "01_softmax", folder)
    (folder / "softmax.py").write_text("def softmx(x, dim=-1):\n    return x\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", str(folder), "-p", "coursekit.pytest_plugin",
                           "-p", "no:cacheprovider", "-x"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    assert "softmax.py defines no 'softmax'" in done.stdout and "softmax.py 中没有 'softmax'" in done.stdout
    assert "AttributeError" not in done.stdout                  # no traceback into the probe library


def test_a_pytest_run_with_the_plugin_keeps_torchs_heap_out_of_full_collections(tmp_path):
    """The plugin freezes the heap when the session starts and again when
    the process exits (full collections would walk all of torch's objects:
    ~0.4 s of a run). What a test creates is still collected; an object
    that a test module keeps sees a frozen heap when the teardown destroys
    it. Without the plugin, none of this. The exit status is pytest's."""
    import subprocess
    import sys

    from grader.course import REPO_ROOT

    test = tmp_path / "test_teardown.py"
    test.write_text(
        "import gc, os, weakref\n"
        "class Reporter:\n"
        "    def __del__(self, frozen=gc.get_freeze_count, write=os.write):\n"
        "        write(1, b' frozen at teardown: %d' % (frozen() > 0))\n"
        "kept = Reporter()\n"
        "class Cycle:\n"
        "    pass\n"
        "def test_a_cycle_made_here_is_collected():\n"
        "    cycle = Cycle()\n"
        "    cycle.me = cycle\n"
        "    gone = weakref.ref(cycle)\n"
        "    del cycle\n"
        "    gc.collect()\n"
        "    assert gone() is None and gc.isenabled()\n"
        "    os.write(1, b' frozen in session: %d' % (gc.get_freeze_count() > 0))\n", encoding="utf-8")

    def run(*plugin: str) -> subprocess.CompletedProcess:
        # --confcutdir: no conftest.py above the temp folder (a stray /tmp/conftest.py) joins the run.
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", str(test), "-p", "no:cacheprovider",
                               "--confcutdir", str(tmp_path), *plugin], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=120)

    without, with_plugin = run(), run("-p", "coursekit.pytest_plugin")
    assert without.returncode == 0 and "1 passed" in without.stdout, without.stdout
    assert "frozen in session: 0" in without.stdout and "frozen at teardown: 0" in without.stdout
    assert with_plugin.returncode == 0 and "1 passed" in with_plugin.stdout, with_plugin.stdout
    assert "frozen in session: 1" in with_plugin.stdout and "frozen at teardown: 1" in with_plugin.stdout


def test_compare_tensors_accepts_exactly_what_its_rule_accepts():
    """The one-pass check (isclose in float64) and the rule it stands for:
    NaN where NaN, the same infinities, |a - e| <= atol + rtol * |e|."""
    import random

    def rule(a, e, atol, rtol):
        af, ef = a.to(torch.float64), e.to(torch.float64)
        if not torch.equal(af.isnan(), ef.isnan()):
            return False
        keep = ~af.isnan()
        x, y = af[keep], ef[keep]
        diff = (x - y).abs()
        diff[torch.isinf(x) & torch.isinf(y) & (x == y)] = 0.0
        return not bool((diff > atol + rtol * y.abs().nan_to_num(posinf=0.0, neginf=0.0)).any())

    rng = random.Random(19)
    specials = [float("nan"), float("inf"), float("-inf"), 0.0, 1e-5, -1e-5, 1e30]
    for _ in range(3000):
        size = rng.randint(1, 5)
        e = torch.tensor([rng.choice(specials) if rng.random() < 0.3 else rng.gauss(0, 1) for _ in range(size)])
        a = e.clone()
        for i in range(size):
            if rng.random() < 0.2:
                a[i] = rng.choice(specials)
            elif rng.random() < 0.4:
                a[i] += rng.choice([1e-6, 1e-5, 2e-5, 1e-4, 1e-3]) * rng.choice([-1, 1])
        atol, rtol = rng.choice([(1e-5, 1e-4), (1e-10, 1e-9), (0.0, 0.0), (3e-3, 1e-2)])
        for dtype in (torch.float32, torch.float64):
            x, y = a.to(dtype), e.to(dtype)
            assert (compare_tensors(x, y, atol=atol, rtol=rtol) is None) == rule(x, y, atol, rtol), (x, y, atol, rtol)


def test_a_new_mistake_gets_each_hint_once_and_guesses_marked_possibly(tmp_path):
    """pytest exercises/03_masking on the reference scaled by sqrt(d) + 0.01
    (issue 31): no known mistake reproduces it, so every hint is a guess,
    marked "possibly", and each hint's text is printed once however many
    tests fail."""
    import shutil
    import subprocess
    import sys

    from grader.course import REPO_ROOT, load_course

    folder = tmp_path / "03_masking"
    shutil.copytree(REPO_ROOT / "exercises" / "03_masking", folder)
    reference = (REPO_ROOT / "solutions" / "03_masking" / "attention.py").read_text(encoding="utf-8")
    line = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)"
    assert reference.count(line) == 1
    (folder / "attention.py").write_text(reference.replace(line, line.replace("math.sqrt(d_k)", "(math.sqrt(d_k) + 0.01)")),
                                         encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", str(folder), "-p", "coursekit.pytest_plugin",
                           "-p", "no:cacheprovider", "-q"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout
    titles = re.findall(r"-+ (hint \[[\w-]+\][^-]*?) -+\n", done.stdout)
    assert titles and all("(possibly · 可能)" in title for title in titles), titles
    hint = load_course(check_files=False).pitfall("missing-scale").hint
    assert done.stdout.count(hint.en) == 1 and done.stdout.count(hint.zh) == 1
