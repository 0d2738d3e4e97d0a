"""Run an exercise's public tests inside a Jupyter notebook.

The course's notebooks (the nbgrader assignments and the ``NN_slug.ipynb``
beside each stub) are generated from the exercise folders: an answer cell
with the module's code, a read-only cell that defines the public tests
(the exercise's ``test_*.py``, verbatim) and one test cell per test
function, which runs it on what the answer cell defined::

    tests_01 = PublicTests(exercise="01", module="softmax", symbols=["softmax"],
                           files={"test_softmax.py": SOURCE}, course=COURSE)
    ...
    tests_01.run("test_large_scores_do_not_overflow", globals())

Why not pytest itself: a notebook has no files to collect, and calling
``pytest.main`` once per cell is slow and fragile inside a kernel. The
tests only need the ``student`` fixture, ``parametrize`` and the
``pitfalls`` mark, which this module provides; failures are reported as the
pytest plugin reports them (what was checked, expected, got, and the hints
of matching pitfalls in English and Chinese).

An exam's tests (``test_variant.py``) also take the ``variant`` fixture: the
student's sizes and public seed. An exam notebook passes them
(``PublicTests(..., variant={...})``, in its read-only cell); otherwise they
come from ``variant.json`` in the current directory, which is the notebook's
folder when Jupyter or nbgrader runs it.

Nothing here is secret: it ships to students with the rest of coursekit.
"""
from __future__ import annotations

import inspect
import itertools
import json
import linecache
import re
import tempfile
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coursekit.course import CourseInfo
from coursekit.expect import ProbeFailure

# Names a notebook's namespace holds that are IPython's, not the student's.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "_", "__", "___", "_ih", "_oh", "_dh", "__builtins__"}
# IPython's history aliases: _i, _ii, _iii, _i7 (inputs) and _7 (outputs).
_IPYTHON_ALIAS_RE = re.compile(r"^_(i{1,3}|i\d+|\d+)$")
VARIANT_FILE = "variant.json"


class FixtureError(Exception):
    """A fixture the notebook provides could not be made; the message says why."""


class PublicTestFailed(AssertionError):
    """One or more cases of a public test failed (details printed above)."""


@dataclass
class Case:
    """One call of a test function: its parameters and its display id."""

    params: dict
    id: str = ""


@dataclass
class CaseOutcome:
    case: Case
    status: str  # passed | failed | skipped
    message: str = ""
    pitfalls: list[str] = field(default_factory=list)
    not_implemented: bool = False
    sure: set[str] = field(default_factory=set)  # pitfalls named for sure; the others are guesses


def _code_filenames(obj: object) -> list[str]:
    """The files (for notebook cells: IPython's cell file names) that
    define a function or the methods of a class."""
    functions = []
    if inspect.isclass(obj):
        for value in vars(obj).values():
            value = getattr(value, "__func__", value)        # staticmethod / classmethod
            value = getattr(value, "fget", value)            # property
            if inspect.isfunction(value):
                functions.append(value)
    elif inspect.isfunction(obj):
        functions.append(obj)
    return [f.__code__.co_filename for f in functions]


def _answer_source(namespace: dict, symbols: list[str]) -> str:
    """The source of the cells that defined ``symbols``, in first-seen order.

    IPython keeps every executed cell in ``linecache`` under the file name
    its code objects carry, so this is exactly the code that ran, even if
    the cell was edited and run again (the newest run wins)."""
    seen: list[str] = []
    for name in symbols:
        for filename in _code_filenames(namespace.get(name)):
            if filename not in seen:
                seen.append(filename)
    return "\n".join("".join(linecache.getlines(filename)) for filename in seen)


def module_from_namespace(namespace: dict, module_name: str, symbols: list[str], workdir: Path) -> types.ModuleType:
    """A module object holding what the notebook defined, as the ``student``
    fixture would import it from ``<module_name>.py``.

    ``__file__`` points at a copy of the answer cell's source, so probes that
    read the source (forbidden calls) see the student's code."""
    missing = [name for name in symbols if name not in namespace]
    if missing:
        raise NameError(f"{', '.join(missing)} not defined: run the answer cell above first")
    module = types.ModuleType(module_name)
    module.__dict__.update({k: v for k, v in namespace.items()
                            if k not in _IPYTHON_NAMES and not _IPYTHON_ALIAS_RE.match(k)})
    path = workdir / f"{module_name}.py"
    path.write_text(_answer_source(namespace, symbols), encoding="utf-8")
    module.__file__ = str(path)
    module.__name__ = module_name
    return module


def _parametrize_marks(function) -> list:
    return [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]


def _mark_cases(mark) -> list[Case]:
    """The cases of one ``@pytest.mark.parametrize``."""
    argnames = mark.kwargs.get("argnames", mark.args[0] if mark.args else None)
    argvalues = mark.kwargs.get("argvalues", mark.args[1] if len(mark.args) > 1 else None)
    ids = mark.kwargs.get("ids")
    names = [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
    cases = []
    for index, value in enumerate(argvalues):
        explicit_id = None
        if hasattr(value, "values") and hasattr(value, "marks"):   # pytest.param(...)
            explicit_id, value = value.id, value.values
            value = value if len(names) > 1 else value[0]
        values = tuple(value) if len(names) > 1 else (value,)
        if explicit_id is None and isinstance(ids, (list, tuple)):
            explicit_id = str(ids[index])
        elif explicit_id is None and callable(ids):
            explicit_id = "-".join(str(ids(v)) for v in values)
        if explicit_id is None:
            explicit_id = "-".join(str(v) if isinstance(v, (int, float, str, bool)) or v is None
                                   else f"{n}{index}" for n, v in zip(names, values))
        cases.append(Case(dict(zip(names, values)), explicit_id))
    return cases


def expand_cases(function) -> list[Case]:
    """Every case of a test function: the product of its parametrize marks
    (pytest's order: the innermost decorator's ids come first)."""
    per_mark = [_mark_cases(mark) for mark in _parametrize_marks(function)]
    if not per_mark:
        return [Case({})]
    cases = []
    for combination in itertools.product(*per_mark):
        params, ids = {}, []
        for case in combination:
            params.update(case.params)
            ids.append(case.id)
        cases.append(Case(params, "-".join(ids)))
    return cases


def _short_traceback(exc: BaseException) -> str:
    """The last frames of an error, without this module's own."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__][-3:]
    lines = traceback.format_list(frames)
    return "".join(lines) + f"{type(exc).__name__}: {exc}"


class PublicTests:
    """The public tests of one exercise, defined from their source."""

    def __init__(self, *, exercise: str, module: str, symbols: list[str], files: dict[str, str], course: dict,
                 variant: dict | None = None):
        self.exercise = exercise
        self.module_name = module.removesuffix(".py")
        self.symbols = list(symbols)
        self.course = CourseInfo(course)
        self._variant = variant
        self._workdir = Path(tempfile.mkdtemp(prefix=f"public-tests-{exercise}-"))
        self.tests: dict[str, object] = {}
        for filename, source in files.items():
            self.tests.update(self._define(filename, source))

    def _define(self, filename: str, source: str) -> dict[str, object]:
        """Execute one test file into its own module (never the notebook's
        namespace: its helpers must not shadow the student's names)."""
        label = f"<public tests {self.exercise}: {filename}>"
        # Registered so that tracebacks through the tests show their lines.
        linecache.cache[label] = (len(source), None, source.splitlines(True), label)
        module = types.ModuleType(Path(filename).stem)
        module.__file__ = label
        exec(compile(source, label, "exec"), module.__dict__)  # noqa: S102 - the course's own tests
        return {name: value for name, value in vars(module).items()
                if name.startswith("test") and inspect.isfunction(value)}

    def names(self) -> list[str]:
        return list(self.tests)

    def _pitfalls(self, function, exc: BaseException) -> tuple[list[str], set[str]]:
        """(the pitfalls to show, those named for sure), as the pytest plugin
        does: reproduced by a diagnosis or recognised by the error message is
        sure, and then only those are shown; the test's own list is a guess."""
        found = list(exc.pitfalls) if isinstance(exc, ProbeFailure) else []
        sure = set(exc.diagnosed) if isinstance(exc, ProbeFailure) else set()
        for mark in getattr(function, "pytestmark", []):
            if mark.name == "pitfalls":
                found += list(mark.args)
        matching = self.course.pitfalls_matching_error(self.exercise, f"{type(exc).__name__}: {exc}")
        found = list(dict.fromkeys([*found, *matching]))
        sure |= set(matching)
        return ([p for p in found if p in sure] if sure else found), sure

    def variant(self) -> dict:
        """The ``variant`` fixture: the exam variant this notebook was built
        with, else ``variant.json`` in the current directory."""
        if self._variant is not None:
            return self._variant
        path = Path.cwd() / VARIANT_FILE
        try:
            variant = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FixtureError(f"this test needs your exam variant: {VARIANT_FILE} is not in {Path.cwd()} "
                               "(keep it beside the notebook, as your exam folder came)") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise FixtureError(f"{path} cannot be read ({type(exc).__name__}: {exc}): "
                               "restore it from your exam folder") from None
        if not isinstance(variant, dict) or not isinstance(variant.get("sizes"), dict):
            raise FixtureError(f"{path} is not an exam variant (no sizes): restore it from your exam folder")
        return variant

    def run_case(self, function, case: Case, student: types.ModuleType) -> CaseOutcome:
        wanted = [p for p in inspect.signature(function).parameters if p not in case.params]
        fixtures = {"student": lambda: student, "variant": self.variant}
        unknown = [p for p in wanted if p not in fixtures]
        if unknown:
            return CaseOutcome(case, "failed", f"needs pytest fixture(s) {unknown}, which notebooks do not provide")
        try:
            values = {name: fixtures[name]() for name in wanted}
        except FixtureError as exc:
            return CaseOutcome(case, "failed", str(exc))
        try:
            function(**case.params, **values)
        except NotImplementedError as exc:
            return CaseOutcome(case, "failed", f"not implemented yet: {exc or 'this part of the exercise'}",
                               not_implemented=True)
        except pytest.skip.Exception as exc:
            return CaseOutcome(case, "skipped", str(exc))
        except ProbeFailure as exc:
            shown, sure = self._pitfalls(function, exc)
            return CaseOutcome(case, "failed", str(exc), shown, sure=sure)
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - student code: report, don't crash
            shown, sure = self._pitfalls(function, exc)
            return CaseOutcome(case, "failed", _short_traceback(exc), shown, sure=sure)
        return CaseOutcome(case, "passed")

    def outcomes(self, name: str, namespace: dict) -> Iterator[CaseOutcome]:
        function = self.tests[name]
        try:
            student = module_from_namespace(namespace, self.module_name, self.symbols, self._workdir)
            # Not in an exercise folder: tell expectations which exercise this is.
            student.__course_exercise__ = self.course.exercise(self.exercise)
        except NameError as exc:
            yield CaseOutcome(Case({}), "failed", str(exc))
            return
        for case in expand_cases(function):
            yield self.run_case(function, case, student)

    def run(self, name: str, namespace: dict) -> None:
        """Run the test ``name`` (all its cases) on what ``namespace`` (the
        notebook's ``globals()``) defines; print each case's outcome and the
        hints, and raise :class:`PublicTestFailed` if any case failed."""
        if name not in self.tests:
            raise KeyError(f"no public test {name!r}; there are: {', '.join(self.tests)}")
        failed = 0
        shown: set[str] = set()
        for outcome in self.outcomes(name, namespace):
            label = f"{name}[{outcome.case.id}]" if outcome.case.id else name
            if outcome.status != "failed":
                print(f"{label}: {outcome.status}")
                continue
            failed += 1
            print(f"{label}: FAILED")
            print("  " + outcome.message.replace("\n", "\n  "))
            for pitfall_id in outcome.pitfalls:
                hint = self.course.hint(pitfall_id)
                if hint is None or pitfall_id in shown:  # one mistake, its hint said once
                    continue
                shown.add(pitfall_id)
                maybe = "" if pitfall_id in outcome.sure else " (possibly · 可能)"
                print(f"  hint [{pitfall_id}]{maybe}\n    {hint.en}\n    {hint.zh}")
        if failed:
            raise PublicTestFailed(f"{name}: {failed} case(s) failed (details above)")
