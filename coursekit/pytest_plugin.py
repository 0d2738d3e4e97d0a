"""The pytest plugin behind ``pytest exercises/NN``.

- ``student`` fixture: the exercise's own module, imported from the test's
  folder (never a same-named module of another exercise).
- Hints: a failure that matches a known pitfall gets a section with the
  pitfall's id and its hint in English and Chinese, from ``course.yaml``,
  marked "possibly" when it is a guess (the test's own list) rather than
  reproduced or recognised by its error message; each hint's text is
  printed once per run.
  A pitfall matches when the failed expectation names it
  (:class:`coursekit.expect.ProbeFailure`), when the test is marked
  ``@pytest.mark.pitfalls(...)``, or when the error text matches one of the
  pitfall's ``error_patterns``.
- A stub's ``NotImplementedError`` is reported in one line, not a traceback.
- A progress summary per exercise at the end of the run.
- Training tests (``@pytest.mark.training``: a model learns for a few
  seconds) run only on request, so that ``pytest exercises/NN`` answers
  at once: ``--train``, ``-m training``, a ``-k`` that selects training
  tests only, or the training test's file named on the command line.
  Every pitfall's public hint comes from a quick test too (the selftest
  checks it); the progress summary says when a training test did not run
  and how to run it.
- Torch's heap is kept out of the garbage collector's full collections at
  the session's end and at exit (~0.4 s of every run).
- ``COURSEKIT_REPORT=path.json`` writes every test's outcome and hint ids
  (the repository's self-tests read it).
"""
from __future__ import annotations

import atexit
import gc
import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from coursekit.heap import frozen_imports

with frozen_imports():  # torch's ~170k objects: for the process's life, next to no garbage
    import torch

from coursekit.course import CourseInfo, exercise_id_of
from coursekit.expect import ProbeFailure
from coursekit.loader import ExerciseImportError, load_module, missing_name


@dataclass
class Outcome:
    nodeid: str
    folder: str
    exercise: str
    outcome: str  # passed | failed | skipped
    not_implemented: bool = False
    training: bool = False  # a training test (@pytest.mark.training)
    training_not_run: bool = False  # ... skipped because it was not asked for
    pitfalls: list[str] = field(default_factory=list)
    message: str = ""


_OUTCOMES: list[Outcome] = []


def _exercise_folder(path: Path) -> Path | None:
    for folder in [path.parent, *path.parents]:
        if exercise_id_of(folder):
            return folder
    return None


def _course(folder: Path) -> CourseInfo:
    return CourseInfo.near(folder)


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption("--train", action="store_true", default=False,
                         help="also run the exercises' training tests (a model learns for a few seconds each)")
    except ValueError:  # loaded twice (exercises/conftest.py and -p coursekit.pytest_plugin): once is enough
        pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pitfalls(*ids): pitfall ids whose hints a failure of this test shows")
    config.addinivalue_line("markers", "training: trains a model for seconds; runs with --train or when its file is named")
    # Exercise tensors are tiny: one thread is faster than two fighting over
    # a shared machine, and makes timings steadier.
    torch.set_num_threads(1)
    _keep_the_heap_out_of_the_collector()


_heap_frozen: list[bool] = []


def _keep_the_heap_out_of_the_collector() -> None:
    """Once per process, when its first session starts: move what is loaded
    by then (torch, pytest, the course's code) out of the garbage
    collector's reach, and everything left when the process exits. Each
    full collection walks every object it can reach: pytest runs two when
    the session ends (to find unraisable exceptions) and the interpreter's
    teardown more, over all of torch's objects; 0.4 s of a `pytest
    exercises/11` here, ~0.03 s now. What the tests create is collected as
    usual until the exit. Once per process: a session run inside another
    one (pytester) does not freeze the other's objects again."""
    if not _heap_frozen:
        _heap_frozen.append(True)
        gc.freeze()
        atexit.register(gc.freeze)


@pytest.fixture(scope="module")
def student(request: pytest.FixtureRequest):
    """The student's module for the exercise this test file belongs to."""
    test_path = Path(str(request.node.path))
    folder = _exercise_folder(test_path)
    if folder is None:
        pytest.fail(f"{test_path} is not inside an exercise folder (NN_slug/)", pytrace=False)
    exercise = _course(folder).exercise(exercise_id_of(folder))
    if exercise is None:
        pytest.fail(f"exercise {folder.name} is not listed in course.yaml", pytrace=False)
    try:
        return load_module(folder, exercise["module"])
    except ExerciseImportError as exc:
        pytest.fail(str(exc), pytrace=False)


TRAINING_NOT_RUN = "a training test: run it with --train"


def _training_requested(config: pytest.Config, item: pytest.Item, selected: list[pytest.Item]) -> bool:
    """--train, a -m expression naming training, a -k expression that
    selects training tests only, or the test's own file (or one of its
    tests) named on the command line."""
    if config.getoption("train", default=False) or "training" in (config.getoption("markexpr", default="") or ""):
        return True
    if config.getoption("keyword", default="") and all(i.get_closest_marker("training") for i in selected):
        return True
    here = Path(str(item.path)).resolve()
    invocation = Path(config.invocation_params.dir)
    return any((invocation / arg.split("::", 1)[0]).resolve() == here for arg in config.args)


_NOT_ASKED_FOR = pytest.StashKey[bool]()  # a training test skipped because nobody asked for it


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they leave out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason=TRAINING_NOT_RUN)
    for item in items:
        if item.get_closest_marker("training") and not _training_requested(config, item, items):
            item.add_marker(skip)
            item.stash[_NOT_ASKED_FOR] = True


def _error_text(excinfo: pytest.ExceptionInfo) -> str:
    return f"{excinfo.type.__name__}: {excinfo.value}"


def _pitfalls_for(item: pytest.Item, excinfo: pytest.ExceptionInfo, folder: Path) -> tuple[list[str], set[str]]:
    """(the pitfalls to show, in order; those named for sure). For sure: a
    diagnosis reproduced it, or the error text matches one of its known
    messages; when there are any, only they are shown. Otherwise the test's
    own list (expectation, mark: what *often* causes such a failure) is
    shown as guesses, since a new mistake fails the same test."""
    found: list[str] = []
    sure: set[str] = set()
    if isinstance(excinfo.value, ProbeFailure):
        found += excinfo.value.pitfalls
        sure.update(excinfo.value.diagnosed)
    for mark in item.iter_markers("pitfalls"):
        found += list(mark.args)
    matching = _course(folder).pitfalls_matching_error(exercise_id_of(folder), _error_text(excinfo))
    found += matching
    sure.update(matching)
    found = list(dict.fromkeys(found))  # unique, in order
    # A mistake named for sure is the one to show: the guesses beside it
    # would point elsewhere (one mistake, one hint).
    return ([p for p in found if p in sure] if sure else found), sure


def _stub_location(excinfo: pytest.ExceptionInfo) -> str:
    entry = excinfo.traceback[-1]
    return f"{Path(str(entry.path)).name}:{entry.lineno + 1} ({entry.name})"


def _short_failure(excinfo: pytest.ExceptionInfo | None) -> str | None:
    """The one-line report of a stub's NotImplementedError or of a name the
    module does not define; None for any other failure."""
    if excinfo is None:
        return None
    if excinfo.errisinstance(NotImplementedError):
        return (f"not implemented yet: {excinfo.value or 'this part of the exercise'}"
                f"\n  (raised at {_stub_location(excinfo)})")
    if excinfo.errisinstance(AttributeError) and (missing := missing_name(str(excinfo.value))):
        module, name = missing
        return (f"{module}.py defines no {name!r}: write it at the top level of {module}.py, "
                f"spelled as in README.md\n{module}.py 中没有 {name!r}：请按 README 中的名字在文件顶层定义它")
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport | None:
    """A stub's failure, reported without pytest formatting its traceback:
    an untouched exercise fails every test, and formatting those tracebacks
    was a third of the run (0.6 s of `pytest exercises/06` on the stub)."""
    if call.when == "teardown" or _exercise_folder(Path(str(item.path))) is None:
        return None
    longrepr = _short_failure(call.excinfo)
    if longrepr is None:
        return None
    sections = [(f"Captured {key} {when}", content) for when, key, content in item._report_sections]
    return pytest.TestReport(item.nodeid, item.location, dict.fromkeys(item.keywords, 1), "failed", longrepr,
                             call.when, sections, call.duration, call.start, call.stop,
                             user_properties=item.user_properties)


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_makereport")
def pytest_runtest_makereport_records(item: pytest.Item, call: pytest.CallInfo):
    """Every exercise test's outcome for the progress table, and the hints
    of the pitfalls a failure matches."""
    report = yield
    folder = _exercise_folder(Path(str(item.path)))
    if folder is None:
        return report
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        training = bool(item.get_closest_marker("training"))
        outcome = Outcome(item.nodeid, str(folder), exercise_id_of(folder), report.outcome, training=training,
                          training_not_run=report.skipped and item.stash.get(_NOT_ASKED_FOR, False))
        excinfo = call.excinfo
        if report.failed and excinfo is not None:
            if excinfo.errisinstance(NotImplementedError):
                outcome.not_implemented = True
            elif _short_failure(excinfo) is None:
                outcome.pitfalls, sure = _pitfalls_for(item, excinfo, folder)
                _add_hints(report, folder, outcome.pitfalls, sure)
            outcome.message = str(excinfo.value).splitlines()[0] if str(excinfo.value) else excinfo.typename
        _OUTCOMES.append(outcome)
    return report


# Hints whose text this run has printed already: one mistake fails several
# tests, and its bilingual hint is printed once (later failures refer to it).
_HINTS_SHOWN: set[str] = set()


def _add_hints(report: pytest.TestReport, folder: Path, pitfall_ids: list[str], sure: set[str]) -> None:
    """A section per pitfall: ``hint [id]`` when the failure names it for
    sure, ``hint [id] (possibly · 可能)`` when it is a guess; the text once
    per run (later, a sure one is referred to, a guess left out)."""
    course = _course(folder)
    for pitfall_id in pitfall_ids:
        hint = course.hint(pitfall_id)
        if hint is None:
            continue
        title = f"hint [{pitfall_id}]" + ("" if pitfall_id in sure else " (possibly · 可能)")
        if pitfall_id in _HINTS_SHOWN:
            if pitfall_id in sure:  # a guess said once is enough
                report.sections.append((title, "(the same hint as above · 同上方的提示)"))
            continue
        _HINTS_SHOWN.add(pitfall_id)
        report.sections.append((title, f"{hint.en}\n{hint.zh}"))


def _shown(folder: str, config: pytest.Config) -> str:
    """The exercise folder as the student would type it from where pytest ran."""
    try:
        return str(Path(folder).relative_to(Path(config.invocation_params.dir).resolve()))
    except ValueError:
        return folder


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    by_folder: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in _OUTCOMES:
        by_folder[outcome.folder].append(outcome)
    if by_folder:
        terminalreporter.section("progress")
        for folder, outcomes in sorted(by_folder.items()):
            not_run = [o for o in outcomes if o.training_not_run]
            outcomes = [o for o in outcomes if not o.training_not_run]
            passed = sum(o.outcome == "passed" for o in outcomes)
            failed = [o for o in outcomes if o.outcome == "failed"]
            if not outcomes:
                status = "nothing else selected"
            elif not failed:
                status = "done"
            elif all(o.not_implemented for o in failed):
                status = "not implemented yet" if passed == 0 else f"{len(failed)} not implemented yet"
            else:
                status = f"{len(failed)} to fix"
            terminalreporter.write_line(f"  {Path(folder).name:<28} {passed:>3}/{len(outcomes):<3} passed   {status}")
            if not_run:
                terminalreporter.write_line(f"  {'':<28} + {len(not_run)} training test not run: "
                                            f"pytest {_shown(folder, config)} --train   (训练测试未运行：加上 --train)")
    if path := os.environ.get("COURSEKIT_REPORT"):
        Path(path).write_text(json.dumps([asdict(o) for o in _OUTCOMES], indent=1), encoding="utf-8")
