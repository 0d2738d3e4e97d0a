"""`grader exam build --nbgrader`: one nbgrader assignment per student, the
`variant` fixture of the notebook test runner, and (slow) the real nbgrader
round trip of one student's exam, graded back by `grader exam grade`."""
from __future__ import annotations

import io
import json
import shutil
import time
from contextlib import redirect_stdout

import pytest
import yaml

nbformat = pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")
nbgrader_api = pytest.importorskip("nbgrader.api", reason="nbgrader is not installed")
# nbgrader's own add_submission trips SQLAlchemy 2.1's autoflush warnings; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

from coursekit.notebook import PublicTests  # noqa: E402
from grader.course import REPO_ROOT  # noqa: E402
from grader.exams.build import read_roster  # noqa: E402
from grader.exams.build_class import build_exam  # noqa: E402
from grader.exams.nbgrader import assignment_name  # noqa: E402
from grader.exams.questions import answer_keys  # noqa: E402
from grader.exams.variants import make_variant  # noqa: E402
from grader.release.common import answer_cell_id, definitions_cell_id, graded_cell_id, student_course_data  # noqa: E402
from grader.release.notebooks import CODE_STUB  # noqa: E402
from grader.release.student_repo import find_leaks  # noqa: E402
from nbgrader_run import NbgraderWorld, cell_by_id, nbgrader_meta  # noqa: E402
from test_exams import SECRET, solved  # noqa: E402
from test_release_notebooks import FakeKernel  # noqa: E402

STUDENTS = ["s001", "s002", "s003"]
PLAIN_FILES = {"README.md", "variant.json", "questions.md", "answers.yaml"}
VARIANT_TESTS = {"03": ["test_causal_mask_of_your_length", "test_padding_mask_of_your_batch",
                        "test_causal_attention_over_your_heads", "test_attention_to_padded_keys_of_your_sizes"],
                 "06": ["test_split_heads_of_your_sizes", "test_merge_heads_undoes_split_heads_of_your_sizes",
                        "test_multihead_attention_of_your_sizes"]}


def _roster(path, students):
    path.write_text("student_id\n" + "\n".join(students) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(course, midterm, tmp_path_factory):
    """The folders and the nbgrader course directory of three students."""
    base = tmp_path_factory.mktemp("exam-nbgrader")
    started = time.perf_counter()
    variants = build_exam(course, midterm, read_roster(_roster(base / "roster.csv", STUDENTS)), SECRET, base / "out",
                          REPO_ROOT, nbgrader=base / "nb", exchange=base / "exchange")
    return base, {v.student: v for v in variants}, time.perf_counter() - started


def _notebook(folder, exercise):
    return nbformat.read(folder / f"{exercise.folder}.ipynb", as_version=4)


def _released(course, source, target):
    """What `nbgrader generate_assignment` makes of a source folder: the
    solution regions cleared, the other files as they are."""
    from nbgrader.preprocessors import ClearSolutions

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.ipynb"))
    for path in source.glob("*.ipynb"):
        notebook, _ = ClearSolutions(code_stub={"python": CODE_STUB}).preprocess(
            nbformat.read(path, as_version=4), {"language": "python"})
        nbformat.write(notebook, target / path.name)
    return target


# ---------------------------------------------------------------- the build

def test_one_assignment_per_student_with_their_own_sizes(built, course, midterm):
    from nbgrader.preprocessors import CheckCellMetadata

    base, variants, seconds = built
    source = base / "nb" / "source"
    assert sorted(p.name for p in source.iterdir()) == [assignment_name("midterm", s) for s in STUDENTS]
    definitions = {}
    for student in STUDENTS:
        folder = source / f"midterm-{student}"
        assert {p.name for p in folder.iterdir()} == PLAIN_FILES | {"03_masking.ipynb", "06_multihead.ipynb",
                                                                     "causal_attention.py"}
        assert json.loads((folder / "variant.json").read_text()) == variants[student].public()
        for name in ("questions.md", "answers.yaml"):             # as in the student's exam folder
            assert (folder / name).read_text() == (base / "out" / student / name).read_text()
        readme = (folder / "README.md").read_text()
        assert "120" in readme and "时间" in readme and f"| `d_model` | {variants[student].sizes['d_model']} |" in readme
        for item in midterm.exercises:
            exercise = course.exercise(item.id)
            notebook = _notebook(folder, exercise)
            CheckCellMetadata().preprocess(notebook, {})
            graded = {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"]
                      for c in notebook.cells if nbgrader_meta(c).get("grade")}
            assert sum(graded.values()) == pytest.approx(item.points)   # the exam's points, not the course's
            assert {graded_cell_id(exercise, name) for name in VARIANT_TESTS[item.id]} <= set(graded)
            assert "时间" in notebook.cells[0].source and f"`{student}`" in notebook.cells[0].source
            cell = cell_by_id(notebook, definitions_cell_id(exercise)).source
            assert f"variant={variants[student].public()!r}" in cell
            definitions[student, item.id] = cell
    for item in midterm.exercises:                                 # no other student's sizes or seed
        for student in STUDENTS:
            others = [v.public() for s, v in variants.items() if s != student]
            assert not [o for o in others if repr(o) in definitions[student, item.id]
                        or f"'seed': {o['seed']}" in definitions[student, item.id]]
        assert definitions["s001", item.id] != definitions["s002", item.id]
    config = (base / "nb" / "nbgrader_config.py").read_text()
    compile(config, "nbgrader_config.py", "exec")
    assert f"c.Exchange.root = {str(base / 'exchange')!r}" in config
    assert "'midterm-s003': ['answers.yaml']" in config             # autograde keeps the submitted answers
    assert seconds < 15, f"building 3 students' folders and assignments took {seconds:.1f} s"


def test_assignments_hold_no_secret(built, course, midterm, tmp_path):
    """Once nbgrader has cleared the solution regions: no reference line, no
    pitfall variant, no hidden check id (find_leaks), no exam secret, hidden
    seed, answer or explanation."""
    base, variants, _ = built
    for student in ("s001", "s002"):
        released = _released(course, base / "nb" / "source" / f"midterm-{student}", tmp_path / student)
        assert find_leaks(released, course, REPO_ROOT) == []
        texts = {p.name: p.read_text(encoding="utf-8") for p in released.iterdir() if p.is_file()}
        secrets = [SECRET.decode(), f"{variants[student].seed}", "correct: true",
                   *(course.question(q).explanation.en for q in midterm.questions if course.question(q).explanation)]
        assert not [(name, s) for name, text in texts.items() for s in secrets if s in text]


def test_exam_notebook_runs_the_variant_tests_in_process(built, course, midterm):
    """The notebook's own cells in a stand-in kernel: the variant tests pass
    on the reference and fail on the stub as not implemented."""
    base, _, _ = built
    exercise = course.exercise("03")
    notebook = _notebook(base / "nb" / "source" / "midterm-s002", exercise)
    definitions = cell_by_id(notebook, definitions_cell_id(exercise)).source
    for answer in ("solutions", "exercises"):
        kernel = FakeKernel()
        kernel.run((REPO_ROOT / answer / exercise.folder / exercise.module).read_text())
        kernel.run(definitions)
        tests = kernel.namespace["tests_03"]
        for name in VARIANT_TESTS["03"]:
            if answer == "solutions":
                assert "passed" in kernel.run(cell_by_id(notebook, graded_cell_id(exercise, name)).source)
            else:
                outcomes = list(tests.outcomes(name, kernel.namespace))
                assert outcomes and all(o.status == "failed" and o.not_implemented for o in outcomes), name


VARIANT_PROBE = '''
def test_heads(student, variant):
    assert variant["sizes"]["heads"] == 3, variant

def test_needs_tmp_path(student, tmp_path):
    pass
'''


def _probe_tests(course, variant=None):
    data = student_course_data(course, [course.exercise("03")])
    return PublicTests(exercise="03", module="attention", symbols=[], files={"test_probe.py": VARIANT_PROBE},
                       course=data, variant=variant)


def test_variant_fixture_from_the_notebook_or_variant_json(course, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (outcome,) = _probe_tests(course).outcomes("test_heads", {})
    assert outcome.status == "failed" and "variant.json is not in" in outcome.message
    (tmp_path / "variant.json").write_text(json.dumps({"sizes": {"heads": 3}, "seed": 1}))
    with redirect_stdout(io.StringIO()):
        _probe_tests(course).run("test_heads", {})                      # from variant.json in the cwd
    (outcome,) = _probe_tests(course, {"sizes": {"heads": 4}}).outcomes("test_heads", {})
    assert outcome.status == "failed"                                   # the notebook's own variant wins
    (tmp_path / "variant.json").write_text("{broken")
    (outcome,) = _probe_tests(course).outcomes("test_heads", {})
    assert "cannot be read" in outcome.message
    (outcome,) = _probe_tests(course).outcomes("test_needs_tmp_path", {})
    assert outcome.message == "needs pytest fixture(s) ['tmp_path'], which notebooks do not provide"


def test_cli_build_with_nbgrader(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from grader.cli import app

    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    result = CliRunner().invoke(app, ["exam", "build", "midterm", "--roster", str(_roster(tmp_path / "r.csv", ["abc"])),
                                      "--out", str(tmp_path / "out"), "--nbgrader", str(tmp_path / "nb")])
    assert result.exit_code == 0, result.output
    assert "nbgrader generate_assignment midterm-abc" in result.output
    assert (tmp_path / "nb" / "source" / "midterm-abc" / "06_multihead.ipynb").is_file()
    assert (tmp_path / "out" / "abc" / "06_multihead" / "test_variant.py").is_file()


def test_answers_and_time_come_from_the_students_own_nbgrader_assignment(built, course, midterm, tmp_path):
    """nbgrader's collected layout, answers only: the student's own
    `midterm-<student>/` is read (not another assignment collected beside it),
    its timestamp.txt is the submission time, someone else's is flagged."""
    from grader.exams.grading import grade_exam

    base, variants, _ = built
    keys = answer_keys(course, midterm, [variants["s001"]], REPO_ROOT)["s001"]
    submitted = tmp_path / "submitted"
    own = submitted / "s001" / "midterm-s001"
    shutil.copytree(base / "nb" / "source" / "midterm-s001", own)
    (own / "answers.yaml").write_text(yaml.safe_dump(solved(keys)), encoding="utf-8")
    (own / "timestamp.txt").write_text("2026-04-20 02:58:30.123456 UTC")     # 09:00+08:00 + 120 min = 03:00 UTC
    shutil.copytree(base / "nb" / "source" / "midterm-s001", submitted / "s001" / "attention")   # a decoy: the template
    shutil.copytree(own, submitted / "s002" / "midterm-s001")
    run = grade_exam(course, midterm, submitted, secret=SECRET, root=REPO_ROOT, workdir=tmp_path / "work")
    results = {r.student: r for r in run.results}
    ours = results["s001"]
    assert ours.question_points == ours.question_max > 0, ours.problems
    assert ours.lateness.source == "nbgrader" and not ours.lateness.flagged
    assert ours.lateness.submitted_at == "2026-04-20T02:58:30.123456+00:00"
    assert any("midterm-s001, not midterm-s002" in p for p in results["s002"].problems)


# ---------------------------------------------------------------- the real thing

@pytest.mark.slow
def test_nbgrader_round_trip_of_one_students_exam(tmp_path, course, midterm, monkeypatch):
    """s001 solves the exam with the references and right answers; `stub`
    hands in s001's assignment untouched. nbgrader autogrades the public and
    variant tests (full marks / none); `grader exam grade` on nbgrader's
    submitted/ gives s001 full code and question marks, from the notebooks and
    answers.yaml of the exam's own assignment folder."""
    from typer.testing import CliRunner

    from grader.cli import app

    started = time.monotonic()
    world = NbgraderWorld(tmp_path)
    world.install_kernel()
    monkeypatch.setenv("GRADER_EXAM_SECRET", SECRET.decode())
    result = CliRunner().invoke(app, ["exam", "build", "midterm", "--roster", str(_roster(tmp_path / "r.csv", ["s001"])),
                                      "--out", str(tmp_path / "out"), "--nbgrader", str(world.course_dir),
                                      "--exchange", str(world.exchange)])
    assert result.exit_code == 0, result.output
    name = assignment_name("midterm", "s001")
    world.run("-m", "nbgrader", "generate_assignment", name, cwd=world.course_dir)
    world.run("-m", "nbgrader", "release_assignment", name, cwd=world.course_dir)
    release = world.course_dir / "release" / name
    assert PLAIN_FILES | {"causal_attention.py"} <= {p.name for p in release.iterdir()}   # extra files are released
    assert find_leaks(release, course, REPO_ROOT) == []

    exercises = [course.exercise(item.id) for item in midterm.exercises]
    keys = answer_keys(course, midterm, [make_variant(course, midterm, "s001", SECRET)], REPO_ROOT)["s001"]
    exchange_args = world.exchange_args("attention-transformers")
    for student in ("s001", "stub"):
        workdir = tmp_path / "students" / student
        workdir.mkdir(parents=True)
        world.run("-m", "nbgrader", "fetch_assignment", name, *exchange_args, cwd=workdir)
        if student == "s001":
            for exercise in exercises:
                path = workdir / name / f"{exercise.folder}.ipynb"
                notebook = nbformat.read(path, as_version=4)
                cell_by_id(notebook, answer_cell_id(exercise)).source = \
                    (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
                nbformat.write(notebook, path)
            (workdir / name / "answers.yaml").write_text(yaml.safe_dump(solved(keys)), encoding="utf-8")
        world.run("-m", "nbgrader", "submit", name, *exchange_args, f"--student={student}", cwd=workdir)
    world.run("-m", "nbgrader", "collect", name, cwd=world.course_dir)
    graded_at = time.monotonic()
    world.run("-m", "nbgrader", "autograde", name, cwd=world.course_dir)
    autograde_s = time.monotonic() - graded_at

    with nbgrader_api.Gradebook(f"sqlite:///{world.course_dir / 'gradebook.db'}") as gb:
        assert gb.find_submission(name, "s001").score == pytest.approx(70)
        assert gb.find_submission(name, "stub").score == 0
        for exercise in exercises:
            for test in VARIANT_TESTS[exercise.id]:
                grade = gb.find_grade(graded_cell_id(exercise, test), exercise.folder, name, "s001")
                assert grade.max_score > 0 and grade.score == grade.max_score, test
    # autograde kept the submitted answers (Autograde.exclude_overwriting)
    autograded = world.course_dir / "autograded" / "s001" / name / "answers.yaml"
    assert yaml.safe_load(autograded.read_text()) == solved(keys)

    # nbgrader collects a student's other assignments beside the exam: a decoy with wrong answers and stubs.
    submitted = world.course_dir / "submitted"
    shutil.copytree(submitted / "stub" / name, submitted / "s001" / "attention")
    result = CliRunner().invoke(app, ["exam", "grade", "midterm", str(submitted), "--out", str(tmp_path / "graded"),
                                      "--jobs", "1"])
    assert result.exit_code == 0, result.output
    results = {r["student"]: r for r in json.loads((tmp_path / "graded" / "results.json").read_text())["results"]}
    ours = results["s001"]
    assert ours["code_points"] == 70, ours["exercises"]
    assert ours["question_points"] == ours["question_max"] > 0
    assert ours["lateness"]["source"] == "nbgrader"                 # timestamp.txt of nbgrader submit
    assert results["stub"]["code_points"] == 0 and results["stub"]["question_points"] == 0
    assert any("midterm-s001, not midterm-stub" in p for p in results["stub"]["problems"])
    print(f"\nexam nbgrader round trip: {time.monotonic() - started:.0f} s (autograde {autograde_s:.0f} s)")

