"""Part C's and part D's assignments released through nbgrader (``gpt``:
exercise 12; ``generate``: 13 and 14; ``modern``: 15 to 18): ``grader release nbgrader``
writes them, and the real ``nbgrader generate_assignment`` accepts them and
hands students the stub, the modules the exercise ships, and the README's
figures inline. And ``modern`` (part D) goes the whole round trip through
the real nbgrader: its notebooks' public tests run in nbgrader's kernel.

Run with an nbgrader that has its templates (``/work/main/.venv``)."""
from __future__ import annotations

import base64
import re
import time

import pytest

nbformat = pytest.importorskip("nbformat", reason="the release extra (pip install -e '.[release]') is not installed")
nbgrader_api = pytest.importorskip("nbgrader.api", reason="nbgrader is not installed")
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

from grader.course import REPO_ROOT, load_course  # noqa: E402
from grader.release.common import grade_cell_id  # noqa: E402
from grader.release.notebooks import BEGIN_SOLUTION  # noqa: E402
from grader.release.student_repo import secret_lines  # noqa: E402
from grader.course.pitfalls import load_variants  # noqa: E402
from nbgrader_run import NbgraderWorld, leaks_nothing, nbgrader_meta  # noqa: E402

COURSE = load_course(check_files=False)
PART_C = [a for a in COURSE.assignments if a.id in ("gpt", "generate", "modern")]


def test_part_c_has_its_assignment():
    assert [a.exercises for a in PART_C if a.id == "gpt"] == [["12"]]


def released_as_promised(released, exercises) -> None:
    """What ``nbgrader generate_assignment`` wrote for students holds one
    locked grade cell with the exercise's points, the stub (no reference
    line), the modules the exercise ships, and the README's figures inline."""
    for exercise in exercises:
        notebook = nbformat.read(released / f"{exercise.folder}.ipynb", as_version=4)
        # One locked grade cell with the exercise's points; the answer cell is the stub.
        graded = [c for c in notebook.cells if nbgrader_meta(c).get("grade") or nbgrader_meta(c).get("task")]
        assert [nbgrader_meta(c)["grade_id"] for c in graded] == [grade_cell_id(exercise)]
        assert nbgrader_meta(graded[0])["points"] == exercise.points
        text = "\n".join(c.source for c in notebook.cells)
        assert BEGIN_SOLUTION not in text
        # Secret as of this release: later exercises (13, 14) ship 12 as working code.
        secrets = secret_lines(COURSE, REPO_ROOT, released=exercises)[f"solutions/{exercise.folder}/{exercise.module}"]
        leaked = [line for line in secrets if line in text]
        assert secrets
        assert leaked == [], f"reference lines in the students' notebook: {leaked[:3]}"
        # The modules the exercise ships (working code of earlier exercises) travel with it.
        for shipped_id in exercise.ships:
            assert (released / COURSE.exercise(shipped_id).module).is_file()
        # The README's figures are inline (the notebook has no docs/ beside it), and are the committed SVGs.
        shown = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", text)
        assert not [link for link in shown if "docs/figures" in link]
        readme = (REPO_ROOT / "exercises" / exercise.folder / "README.md").read_text()
        for name in re.findall(r"\.\./\.\./docs/figures/([\w.-]+\.svg)", readme):
            svg = (REPO_ROOT / "docs" / "figures" / name).read_bytes()
            assert f"data:image/svg+xml;base64,{base64.b64encode(svg).decode()}" in text


# ``modern`` goes through the same in its round trip below.
@pytest.mark.parametrize("assignment", [a for a in PART_C if a.id != "modern"], ids=lambda a: a.id)
def test_release_then_generate_assignment(tmp_path, assignment):
    from typer.testing import CliRunner

    from grader.cli import app

    world = NbgraderWorld(tmp_path)
    result = CliRunner().invoke(app, ["release", "nbgrader", str(world.course_dir), "-a", assignment.id])
    assert result.exit_code == 0, result.output
    exercises = [COURSE.exercise(i) for i in assignment.exercises
                 if (REPO_ROOT / "solutions" / COURSE.exercise(i).folder).is_dir()]
    assert f"source/{assignment.id}: {', '.join(e.folder for e in exercises)}" in result.output

    world.run("-m", "nbgrader", "generate_assignment", assignment.id, cwd=world.course_dir)
    released_as_promised(world.course_dir / "release" / assignment.id, exercises)


@pytest.mark.slow
def test_modern_round_trip_with_the_real_nbgrader(tmp_path):
    """Part D through generate, release, fetch, submit, collect, autograde
    and feedback: the references pass every public test in nbgrader's
    kernel (the modules 16 to 18 ship travel with them), an untouched stub
    says so, a pitfall variant of 15 gets its hint; no hidden check id nor
    reference line reaches any feedback."""
    started = time.monotonic()
    world = NbgraderWorld(tmp_path)
    modern = next(a for a in COURSE.assignments if a.id == "modern")
    exercises = [COURSE.exercise(i) for i in modern.exercises]
    reference = {e.id: (REPO_ROOT / "solutions" / e.folder / e.module).read_text() for e in exercises}
    pitfall = "online-softmax-no-rescale"
    variant = load_variants(COURSE.exercise("15"), REPO_ROOT)[pitfall].source
    answers = {"ref": reference, "mixed": {"15": variant}}   # 16 to 18 left as the stubs
    feedback, autograde_s = world.round_trip(COURSE, "modern", answers)
    released_as_promised(world.course_dir / "release" / "modern", exercises)

    with nbgrader_api.Gradebook(f"sqlite:///{world.course_dir / 'gradebook.db'}") as gb:
        assert gb.find_submission("modern", "ref").max_score == pytest.approx(sum(e.points for e in exercises))
    for exercise in exercises:
        page = feedback[("ref", exercise.folder)]
        assert "FAILED" not in page, f"ref/{exercise.folder}"
    assert f"hint [{pitfall}]" in feedback[("mixed", "15_flash_attention")]
    assert COURSE.pitfall(pitfall).hint.en in feedback[("mixed", "15_flash_attention")]
    for exercise in exercises[1:]:
        assert "not implemented yet" in feedback[("mixed", exercise.folder)]
    leaks_nothing(feedback, COURSE, [(e, feedback[("mixed", e.folder)]) for e in exercises[1:]])
    print(f"\nnbgrader round trip of modern: {time.monotonic() - started:.0f} s (autograde {autograde_s:.0f} s)")
