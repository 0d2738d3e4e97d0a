"""A measured figure that could not tell (grader/remeasure.py, grader/suspects.py).

A fresh-clone CI run, on a busy machine, read the reference of exercise 18
as too near its CPU-time threshold to decide on (it scored 8.9/20), and a
pitfall variant whose own run did so lost its confirmed hint: an undecided
figure counted as a failure no variant explains. Here the verdict of the
work rule is forced (grader.checks.work.verdict) to say "could not tell"
where a busy machine would.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

import grader.checks.memory as memory
import grader.checks.work as work
from accuracy.test_accuracy import ENTRIES, _as_list
from grader.checks import checks_for
from grader.course import REPO_ROOT, load_course
from grader.course.pitfalls import load_variants
from grader.intake.submissions import assemble
from grader.remeasure import measure_again, taking
from grader.sandbox import RunResult, Sandbox

COST_CHECK = "18-cache-cost"


def _undecided_at_first(monkeypatch, times: int = 1) -> list[str]:
    """The work rule's first ``times`` verdicts say could not tell (then the
    real figures decide); returns what each call answered."""
    return _undecided_at(monkeypatch, range(times))


def _undecided_at(monkeypatch, positions) -> list[str]:
    """The work rule's verdicts at ``positions`` (in the order the judge
    asks: one per timed call, its checks in plan order) say could not tell."""
    real, answers, positions = work.verdict, [], set(positions)

    def verdict(spent, cheap, full):
        answer = "could not tell" if len(answers) in positions else real(spent, cheap, full)
        answers.append(answer)
        return answer

    monkeypatch.setattr(work, "verdict", verdict)
    return answers


def _source(course, name: str, exercise_id: str = "18") -> bytes:
    exercise = course.exercise(exercise_id)
    if name == "reference":
        return (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_bytes()
    return load_variants(exercise, REPO_ROOT)[name].source.encode() + b"\n# handed in\n"


def _grade(judge, course, name: str, tmp_path: Path, exercise_id: str = "18"):
    exercise = course.exercise(exercise_id)
    folder = assemble(exercise, _source(course, name, exercise_id), tmp_path / name, course)
    return judge.grade(exercise, folder, tmp_path / "work")


def _verdict(result, check_id: str):
    return next(v for v in result.verdicts if v.check_id == check_id)


@pytest.fixture(scope="module")
def fixed_judge(judge):
    return judge.on_fixed_inputs()


def test_a_figure_that_could_not_tell_is_measured_again_beside_the_reference(fixed_judge, course, tmp_path,
                                                                             monkeypatch):
    answers = _undecided_at_first(monkeypatch)
    before = dict(fixed_judge.input_sets.runs)
    result = _grade(fixed_judge, course, "reference", tmp_path)
    assert answers[0] == "could not tell" and answers[1:] == ["pass"]
    assert fixed_judge.input_sets.runs["measured again"] - before["measured again"] == 2   # its calls and the reference's
    assert _verdict(result, COST_CHECK).passed
    assert result.points == pytest.approx(result.max_points)


COST_CHECKS_14 = [check.id for check in checks_for(load_course().exercise("14")) if check.measured]


@pytest.mark.parametrize("check_id", COST_CHECKS_14)
def test_every_measured_call_is_made_again_in_order(fixed_judge, course, tmp_path, monkeypatch, check_id):
    """14's chunks go on from the cache its single steps left: made again
    alone, the reference's own chunks raised ("the prefill before these
    steps did not complete"), and its undecided figure read as a mistake."""
    position = COST_CHECKS_14.index(check_id)
    answers = _undecided_at(monkeypatch, [position])
    result = _grade(fixed_judge, course, "reference", tmp_path, "14")
    assert answers[position] == "could not tell" and len(answers) == len(COST_CHECKS_14) + 1
    assert _verdict(result, check_id).passed
    assert result.points == pytest.approx(result.max_points)


def test_a_replay_whose_reference_differs_counts_for_nothing(fixed_judge, course, tmp_path):
    """The reference's outputs made again must be its first run's: a replay
    that is not faithful leaves the figure undecided (and never judges the
    submission's values against a reference that broke)."""
    exercise = course.exercise("18")
    plan, expected = fixed_judge.plan(exercise), fixed_judge.expected(exercise, tmp_path)

    def replay(calls, batches, broken: bool = False) -> RunResult:
        index = {id(call): i for i, call in enumerate(plan.calls)}
        made = [expected.calls[index[id(call)]] for call in calls]
        if broken:
            made[-1] = replace(made[-1], ok=False, value=None, error_type="RuntimeError", error="no state")
        return replace(expected, calls=made)

    faithful = measure_again(plan, [COST_CHECK], expected, expected, replay, replay)
    assert faithful.whole
    unfaithful = measure_again(plan, [COST_CHECK], expected, expected, replay,
                               lambda calls, batches: replay(calls, batches, broken=True))
    assert not unfaithful.whole and unfaithful.expected is expected


def test_what_follows_the_verdicts_reads_the_new_calls_of_the_checks_judged_again(fixed_judge, course, tmp_path):
    """Hints, exception replays and figures read a check's calls from the run
    its verdict came from: a submission that knows when it is measured again
    could otherwise pair one run's verdict with another run's explanation."""
    exercise = course.exercise("14")
    plan, first = fixed_judge.plan(exercise), fixed_judge.expected(exercise, tmp_path)
    again = replace(first, calls=[replace(call, value="made again") for call in first.calls])
    taken = taking(plan, ["14-chunks-cost"], first, again)
    chunks = plan.slices["14-chunks-cost"]
    assert len(taken.calls) == len(first.calls)
    assert all((call.value == "made again") == (chunks.start <= i < chunks.stop) for i, call in enumerate(taken.calls))


def test_a_figure_undecided_twice_stays_undecided_for_review(fixed_judge, course, tmp_path, monkeypatch):
    """Measured again, it still says nothing: no point, no mistake, the
    instructor's review (the requirements on it wait, as before)."""
    answers = _undecided_at_first(monkeypatch, times=2)
    result = _grade(fixed_judge, course, "reference", tmp_path)
    assert answers == ["could not tell", "could not tell"]
    cost = _verdict(result, COST_CHECK)
    assert not cost.passed and cost.kind == "could not tell" and not cost.pitfalls
    assert cost.instructor_detail.startswith("measured twice") and cost.instructor_detail.count("recomputing") == 2
    assert _verdict(result, "18-steps").kind == "requires"


def _measured_checks(exercise_id: str) -> set[str]:
    return {check.id for check in checks_for(load_course().exercise(exercise_id)) if check.measured}


# The corpus's mistakes (tests/accuracy/) in exercises with a measured check,
# whose label names a hint and a failing check that is not measured.
HINTED = [entry for entry in ENTRIES if entry.label["expect"] == "loses" and entry.label.get("hint")
          and (measured := _measured_checks(entry.exercise_id))
          and set(_as_list(entry.label.get("fails")) or ["?"]) - measured]


@pytest.fixture()
def nothing_decided(monkeypatch):
    """Every figure of work and memory measured from outside could not tell."""
    monkeypatch.setattr(work, "verdict", lambda *figures: "could not tell")
    monkeypatch.setattr(memory, "verdict", lambda *figures: "could not tell")


@pytest.mark.parametrize("entry", HINTED, ids=lambda entry: entry.name)
def test_an_undecided_figure_hides_no_hint(judge, course, tmp_path, nothing_decided, entry):
    """The accuracy corpus's labelled hints, on a machine where no figure
    decides (the analysis of a submission's own inputs happens in its second
    run, on the fixed ones)."""
    exercise = course.exercise(entry.exercise_id)
    folder = assemble(exercise, entry.path.read_bytes(), tmp_path / "submission", course)
    result = judge.grade(exercise, folder, tmp_path / "work")
    measured = _measured_checks(entry.exercise_id)
    assert not [v for v in result.verdicts if v.check_id in measured and v.passed]   # no figure decided
    assert set(result.pitfalls) & set(_as_list(entry.label["hint"])), \
        [(v.check_id, v.kind, v.pitfalls) for v in result.verdicts if not v.passed]


def test_an_undecided_figure_hides_no_variant_of_grader_check(fixed_judge, course, tmp_path, nothing_decided):
    """`grader check`'s side (a CI run's other failure): a pitfall seen only
    in a check without numbers needs every other check to vouch for it."""
    result = _grade(fixed_judge, course, "receptive-field-no-minus-one", tmp_path)
    assert _verdict(result, COST_CHECK).kind == "could not tell"
    assert "receptive-field-no-minus-one" in {p for v in result.verdicts for p in v.confirmed}


class BreaksWhenMeasuredAgain:
    """A Sandbox whose runs of the submission's measured calls alone (the
    only runs with a clock of their own here) come back as ``status``."""

    def __init__(self, box: Sandbox, status: str) -> None:
        self.box, self.status, self.broken = box, status, 0

    def __getattr__(self, name: str):
        return getattr(self.box, name)

    def run(self, folder: Path, module_name: str, calls, batches=None, timeout_s=None) -> RunResult:
        result = self.box.run(folder, module_name, calls, batches, timeout_s=timeout_s)
        if timeout_s is None:
            return result
        self.broken += 1
        return replace(result, status=self.status, calls=result.calls[:1], reason=f"{self.status} (forced)")


@pytest.mark.parametrize("status", ["tampered", "crashed"])
def test_a_measurement_made_again_that_breaks(fixed_judge, course, tmp_path, monkeypatch, status):
    """Tampering there voids the grade, as in any run of the submission;
    a crash there keeps the first verdict (could not tell), never a pass."""
    _undecided_at_first(monkeypatch)
    box = BreaksWhenMeasuredAgain(fixed_judge.sandbox, status)
    judge = copy.copy(fixed_judge)   # the class's runs, kept
    judge.sandbox = box
    result = _grade(judge, course, "reference", tmp_path)
    assert box.broken == 1
    if status == "tampered":
        assert result.status == "tampered" and result.points == 0
        assert "during call" not in result.reason
        assert result.detail.startswith("in the measured calls made again: ")   # its call numbers are that run's
    else:
        assert result.status == "graded" and _verdict(result, COST_CHECK).kind == "could not tell"
        assert result.points < result.max_points
