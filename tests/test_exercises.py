"""The course's promise, exercise by exercise (see grader/proofs/selftest.py):
the reference passes every public test, the untouched stub fails each one
with "not implemented", every pitfall variant is caught with its own hint
(or is declared hidden-only), and stub and reference expose the same API."""
import inspect

import pytest

from coursekit.loader import load_module
from grader.course import REPO_ROOT, load_course
from grader.intake.submissions import assemble

EXERCISES = load_course().exercises
VARIANTS = [pytest.param(e, p, id=f"{e.folder}-{p.id}") for e in EXERCISES for p in e.pitfalls]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.folder)
def test_reference_passes_every_public_test(exercise, selftest_reports):
    assert selftest_reports[exercise.id].reference == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.folder)
def test_stub_fails_every_public_test_as_not_implemented(exercise, selftest_reports):
    assert selftest_reports[exercise.id].stub == []


@pytest.mark.parametrize("exercise,pitfall", VARIANTS)
def test_pitfall_variant_is_caught_with_its_hint(exercise, pitfall, selftest_reports):
    if pitfall.hidden_only:
        pytest.skip(f"hidden-only: {pitfall.hidden_only}")
    assert selftest_reports[exercise.id].variants[pitfall.id] == []


def _api(module, symbols):
    api = {}
    for name in symbols:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            for method in ("__init__", "forward"):
                if method in vars(obj):
                    api[f"{name}.{method}"] = str(inspect.signature(vars(obj)[method]))
        else:
            api[name] = str(inspect.signature(obj))
    return api


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.folder)
def test_stub_and_reference_have_the_same_api(exercise, course, tmp_path):
    stub = load_module(REPO_ROOT / "exercises" / exercise.folder, exercise.module)
    source = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
    # With the modules it ships, as the grader assembles it.
    reference = load_module(assemble(exercise, source, tmp_path, course), exercise.module)
    assert _api(reference, exercise.symbols) == _api(stub, exercise.symbols)


def test_shipped_modules_are_identical_to_their_reference(course):
    from grader.course import shipped_copies

    stale = [f"{copy} differs from {source} (run: grader sync-shipped)"
             for source, copy in shipped_copies(course) if copy.read_bytes() != source.read_bytes()]
    assert not stale
