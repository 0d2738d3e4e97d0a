"""Release via nbgrader: the generated course directory, pushing our scores
into nbgrader's gradebook, and (slow) the whole round trip with the real
nbgrader: generate, release, fetch, submit, collect, autograde, feedback."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")
nbgrader_api = pytest.importorskip("nbgrader.api", reason="nbgrader is not installed")
# nbgrader's own add_submission trips SQLAlchemy 2.1's autoflush warnings; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.gradebook import Gradebook, Key  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from grader.release.common import grade_cell_id  # noqa: E402
from grader.release.nbgrader import next_steps, push_scores, write_course  # noqa: E402
from grader.release.notebooks import BEGIN_SOLUTION, CODE_STUB, END_SOLUTION  # noqa: E402
from grader.intake.submissions import collect  # noqa: E402
from nbgrader_run import NbgraderWorld, leaks_nothing, visible_text  # noqa: E402
from nbgrader_run import nbgrader_meta as _nbgrader_meta  # noqa: E402

EXERCISES = ["01", "02", "04"]


@pytest.fixture(scope="module")
def course():
    return load_course(check_files=False)


def test_course_directory_has_config_and_one_notebook_per_written_exercise(tmp_path, course):
    release = write_course(course, REPO_ROOT, tmp_path, assignment_ids=["attention"], exchange=tmp_path / "x")
    assert release.assignments["attention"][:1] == ["01_softmax"]
    for folder in ("01_softmax", "02_attention_weights", "04_self_attention"):
        assert (tmp_path / "source" / "attention" / f"{folder}.ipynb").is_file()
    assert "03_masking" in release.skipped["attention"] or (REPO_ROOT / "exercises" / "03_masking").is_dir()
    config = (tmp_path / "nbgrader_config.py").read_text()
    assert "c.CourseDirectory.course_id = 'attention-transformers'" in config
    assert repr(CODE_STUB) in config and f"c.Exchange.root = {str(tmp_path / 'x')!r}" in config
    compile(config, "nbgrader_config.py", "exec")


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_source_notebook_passes_nbgraders_metadata_checks(tmp_path, course, exercise_id):
    from nbgrader.preprocessors import CheckCellMetadata, ClearSolutions

    exercise = course.exercise(exercise_id)
    write_course(course, REPO_ROOT, tmp_path, assignment_ids=["attention"])
    notebook = nbformat.read(tmp_path / "source" / "attention" / f"{exercise.folder}.ipynb", as_version=4)
    CheckCellMetadata().preprocess(notebook, {})
    # One grade cell (an nbgrader task cell) holds the exercise's points: the
    # course grader's score lands there. The public tests earn nothing and say so.
    graded = [c for c in notebook.cells if _nbgrader_meta(c).get("grade") or _nbgrader_meta(c).get("task")]
    assert [_nbgrader_meta(c)["grade_id"] for c in graded] == [grade_cell_id(exercise)]
    assert _nbgrader_meta(graded[0])["locked"] and _nbgrader_meta(graded[0])["points"] == exercise.points
    tests = [c for c in notebook.cells if c.cell_type == "code" and "# Public test" in c.source]
    assert tests and all("earns no points" in c.source and "point)" not in c.source and "points)" not in c.source
                         for c in tests)
    ids = [_nbgrader_meta(c)["grade_id"] for c in notebook.cells]
    assert len(ids) == len(set(ids))
    (answer,) = [c for c in notebook.cells if _nbgrader_meta(c).get("solution")]
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    assert BEGIN_SOLUTION in answer.source and reference.strip() in answer.source
    # What students get after generate_assignment: exactly the stub, then the stub comment.
    student, _ = ClearSolutions(code_stub={"python": CODE_STUB}).preprocess(notebook, {"language": "python"})
    (student_answer,) = [c for c in student.cells if _nbgrader_meta(c).get("solution")]
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text()
    assert student_answer.source == stub.rstrip("\n") + "\n\n" + CODE_STUB + "\n"
    assert END_SOLUTION not in "".join(c.source for c in student.cells)


def _records(db: Path, course, results: dict[tuple[str, str], float]) -> None:
    with Gradebook(db) as gb:
        for (student, exercise_id), points in results.items():
            exercise = course.exercise(exercise_id)
            gb.record(Key(student, exercise_id, f"hash-{student}-{exercise_id}", course.course.version),
                      points=points, max_points=exercise.points, status="graded",
                      reason="" if points == exercise.points else "2 hidden checks failed", verdicts=[])


def test_push_writes_our_scores_into_an_empty_nbgrader_gradebook(tmp_path, course):
    _records(tmp_path / "grades.db", course, {("alice", "01"): 10.0, ("alice", "04"): 7.5, ("bob", "01"): 2.5})
    report = push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)
    assert (report.students, report.notebooks, report.skipped) == (2, 3, [])
    with nbgrader_api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("01_softmax", "attention", "alice").score == pytest.approx(10.0)
        assert gb.find_submission_notebook("04_self_attention", "attention", "alice").score == pytest.approx(7.5)
        assert gb.find_submission_notebook("01_softmax", "attention", "bob").score == pytest.approx(2.5)
        assert gb.find_submission_notebook("02_attention_weights", "attention", "bob").score == 0
        comment = gb.find_comment(grade_cell_id(course.exercise("04")), "04_self_attention", "attention", "alice")
        assert "7.5 / 15 points" in comment.manual_comment and "hidden checks failed" in comment.manual_comment


def _verdict(check_id: str, passed: bool, points: float, max_points: float, **extra) -> dict:
    return {"check_id": check_id, "passed": passed, "points": points, "max_points": max_points,
            "message": {"en": f"the {check_id} check", "zh": f"检查 {check_id}"}, "reason": extra.pop("reason", ""),
            "kind": extra.pop("kind", "value"), "pitfalls": extra.get("confirmed", []) + extra.get("possible", []),
            **extra}


def test_push_writes_every_check_with_points_and_hints_in_both_languages(tmp_path, course):
    """The comment is the student's feedback: each check, its points, the
    confirmed hint (both languages), escaped; the score rounded."""
    exercise = course.exercise("01")
    pitfall = course.pitfall("softmax-overflow")
    per_check = exercise.points / 3
    verdicts = [_verdict("softmax.rows", True, per_check, per_check),
                _verdict("softmax.large", False, 0.0, per_check, reason="got nan <b>where</b> finite values",
                         confirmed=[pitfall.id], possible=[]),
                _verdict("softmax.dim", True, per_check, per_check)]
    noisy = per_check * 2 + 1e-13   # float noise as a sum of check points makes it
    with Gradebook(tmp_path / "grades.db") as gb:
        gb.record(Key("alice", "01", "h", course.course.version), points=noisy, max_points=exercise.points,
                  status="graded", reason="", verdicts=verdicts)
    push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)
    with nbgrader_api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook("01_softmax", "attention", "alice")
        assert notebook.score == round(noisy, 2) and repr(notebook.score) == repr(round(noisy, 2))
        text = gb.find_comment(grade_cell_id(exercise), "01_softmax", "attention", "alice").manual_comment
    assert text.count("✓ passed") == 2 and text.count("✗ failed") == 1
    assert f"softmax.large: 0 / {round(per_check, 2):g}" in text.replace("&#95;", "_").replace("&#46;", ".")
    assert pitfall.hint.en.split()[0] in text and pitfall.hint.zh[:6] in text
    assert "Confirmed mistake" in text and "已确认" in text
    assert "<b>where</b>" not in text and "&lt;b&gt;where&lt;/b&gt;" in text   # student-derived text is escaped
    assert f"{round(noisy, 2):g} / {exercise.points:g} points" in text and "9999" not in text


def test_push_says_to_regenerate_feedback_and_warns_when_it_is_stale(tmp_path):
    steps, warnings = next_steps(tmp_path, "attention")
    assert warnings == [] and "generate_feedback attention --force" in steps[0]
    (tmp_path / "feedback" / "alice" / "attention").mkdir(parents=True)
    (tmp_path / "feedback" / "alice" / "attention" / "01_softmax.html").write_text("old")
    (tmp_path / "feedback" / "bob" / "other").mkdir(parents=True)
    (tmp_path / "feedback" / "bob" / "other" / "01_softmax.html").write_text("old")
    steps, warnings = next_steps(tmp_path, "attention")
    assert len(warnings) == 1 and "1 student(s) (alice)" in warnings[0] and "--force" in warnings[0]


def test_push_again_replaces_the_scores(tmp_path, course):
    _records(tmp_path / "grades.db", course, {("alice", "01"): 10.0})
    push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)
    time.sleep(0.01)  # the newest record wins: graded_at must differ
    _records(tmp_path / "grades.db", course, {("alice", "01"): 4.0})
    push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)
    with nbgrader_api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        assert gb.find_submission("attention", "alice").score == pytest.approx(4.0)


def test_push_refuses_unknown_assignment_and_missing_db(tmp_path, course):
    from grader.release.common import ReleaseError

    with pytest.raises(ReleaseError, match="no assignment 'nope'"):
        push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "nope", REPO_ROOT)
    with pytest.raises(ReleaseError, match="run `grader grade` first"):
        push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)


# --- the real thing ---------------------------------------------------------------

@pytest.mark.slow
def test_nbgrader_round_trip(tmp_path, course):
    """Reference: full marks; stub: none; a pitfall variant: partial marks,
    its hint in the feedback; no hidden check id nor reference line in any
    feedback; our grader reads the collected notebooks; push lands in the
    gradebook nbgrader made."""
    started = time.monotonic()
    world = NbgraderWorld(tmp_path)
    course_dir = world.course_dir
    # An assignment of just the three exercises this test fills in (autograde is slow).
    attention = next(a for a in course.assignments if a.id == "attention")
    course = course.model_copy(update={"assignments": [attention.model_copy(update={"exercises": EXERCISES})]})
    exercises = [course.exercise(i) for i in EXERCISES]
    reference = {e.id: (REPO_ROOT / "solutions" / e.folder / e.module).read_text() for e in exercises}
    variant = load_variants(course.exercise("01"), REPO_ROOT)["softmax-overflow"].source
    # Two students: the references, and 01's variant beside untouched stubs (02, 04).
    answers = {"ref": reference, "variant": {"01": variant}}
    stubs = [e for e in exercises if e.id != "01"]
    feedback, autograde_s = world.round_trip(course, "attention", answers)

    db_url = f"sqlite:///{course_dir / 'gradebook.db'}"
    with nbgrader_api.Gradebook(db_url) as gb:
        # Before the push nbgrader has no grade to give: the public tests earn
        # nothing, and the grade cells wait for the course grader's score.
        total = sum(e.points for e in exercises)
        assert gb.find_submission("attention", "ref").max_score == pytest.approx(total)
        assert all(gb.find_submission("attention", s).score == 0 for s in answers)
        assert gb.find_submission("attention", "ref").needs_manual_grade

    variant_page = feedback[("variant", "01_softmax")]
    assert "hint [softmax-overflow]" in variant_page
    assert course.pitfall("softmax-overflow").hint.en in variant_page
    assert "FAILED" not in feedback[("ref", "01_softmax")]
    assert "not implemented yet" in feedback[("variant", "04_self_attention")]
    leaks_nothing(feedback, course, [(e, feedback[("variant", e.folder)]) for e in stubs])

    # Our grader reads nbgrader's collected layout: the answer cells, as submitted.
    found = {s.student: s for s in collect(course_dir / "submitted", course, exercises, tmp_path / "work")}
    for exercise in exercises:
        extracted = (found["ref"].exercises[exercise.id].folder / exercise.module).read_text()
        assert extracted.strip() == reference[exercise.id].strip()
    for exercise in stubs:
        stub_part = found["variant"].exercises[exercise.id]
        assert stub_part.problem == "" and "NotImplementedError" in (stub_part.folder / exercise.module).read_text()
    assert (found["variant"].exercises["01"].folder / exercises[0].module).read_text().strip() == variant.strip()

    # And our scores land in the gradebook nbgrader built, over its own.
    _records(tmp_path / "grades.db", course, {("variant", "01"): 3.0, ("ref", "01"): 10.0})
    push_scores(course, tmp_path / "grades.db", course_dir / "gradebook.db", "attention", REPO_ROOT)
    with nbgrader_api.Gradebook(db_url) as gb:
        assert gb.find_submission_notebook("01_softmax", "attention", "variant").score == pytest.approx(3.0)
        assert gb.find_submission_notebook("04_self_attention", "attention", "variant").score == 0  # no record
    # The feedback generated before the push is stale: regenerated with --force, it shows our score.
    assert next_steps(course_dir, "attention")[1]
    world.run("-m", "nbgrader", "generate_feedback", "attention", "--force", cwd=course_dir)
    page = visible_text(course_dir / "feedback" / "variant" / "attention" / "01_softmax.html")
    assert "3 / 10 points" in page and "Course grader" in page
    print(f"\nnbgrader round trip: {time.monotonic() - started:.0f} s (autograde {autograde_s:.0f} s)")


def test_cli_release_and_push(tmp_path, course):
    from typer.testing import CliRunner

    from grader.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["release", "nbgrader", str(tmp_path / "course"), "-a", "attention"])
    assert result.exit_code == 0, result.output
    attention = next(a for a in course.assignments if a.id == "attention")
    written = [course.exercise(i).folder for i in attention.exercises
               if (REPO_ROOT / "solutions" / course.exercise(i).folder).is_dir()]
    assert f"source/attention: {', '.join(written)}" in result.output
    result = runner.invoke(app, ["release", "nbgrader", str(tmp_path / "course"), "-a", "nope"])
    assert result.exit_code == 2 and "nope" in result.output  # an unknown id is careless input (exit 2)
    _records(tmp_path / "grades.db", course, {("alice", "02"): 5.0})
    # nbgrader creates its gradebook (generate_assignment, autograde); push never creates one.
    from nbgrader.api import Gradebook as NbGradebook

    from grader.release.nbgrader import alembic_on_path

    alembic_on_path()
    with NbGradebook(f"sqlite:///{tmp_path / 'gradebook.db'}"):
        pass
    result = runner.invoke(app, ["push", "nbgrader", "attention", "--db", str(tmp_path / "grades.db"),
                                 "--nbgrader-db", str(tmp_path / "gradebook.db")])
    assert result.exit_code == 0, result.output
    assert "1 notebook score(s) of 1 student(s) pushed" in result.output


def test_adjust_after_a_push_reminds_to_push_again(tmp_path, course):
    """Issue 34, item 1: an adjustment made after the push never reached nbgrader without a word."""
    import subprocess
    import sys

    _records(tmp_path / "grades.db", course, {("alice", "01"): 10.0, ("bob", "01"): 2.5})

    def adjust(student: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader", "adjust", student, "01", "--delta", "1", "--reason",
                               "office hours", "--db", str(tmp_path / "grades.db")], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=300)

    before = adjust("bob")
    assert before.returncode == 0 and "push" not in before.stderr
    push_scores(course, tmp_path / "grades.db", tmp_path / "gradebook.db", "attention", REPO_ROOT)
    after = adjust("bob")
    assert after.returncode == 0 and "grader push nbgrader attention" in after.stderr, after.stderr
    assert "generate_feedback --force" in after.stderr
