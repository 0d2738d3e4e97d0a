"""``run_autograder``'s Python side: grade ``ROOT/submission`` and write
``ROOT/results/results.json`` (see :mod:`grader.scale.gradescope`).

The submission may hold the exercise folders, a whole checkout, the
notebooks, or the bare modules (Gradescope's file upload): ``collect``
finds each (``bare_modules``)."""
from __future__ import annotations

import json
import sys
import tempfile
import traceback
from pathlib import Path

from grader.course import load_course
from grader.gradebook import Gradebook
from grader.run.grading import grade_class
from grader.checks.inputs import HiddenInputs, load_grading_secret
from grader.judge import Judge
from grader.sandbox import Limits, Sandbox
from grader.scale.gradescope import results_json

STUDENT = "submission"


def grade_submission(root: Path) -> dict:
    """results.json's content for ``root/submission``.

    The submission is read in place, following nothing (``collect``): a
    link, a special file, a damaged zip or notebook gives the exercises
    the status ``unreadable`` with its reason, never a crash of the run."""
    source = root / "source"
    config = json.loads((source / "gradescope.json").read_text(encoding="utf-8"))
    # Unchecked: the zip leaves out what an exercise run does not need (exams/).
    course = load_course(source / "course.yaml", check_files=False)
    exercises = [course.exercise(i) for i in config["exercises"]]
    limits = Limits(**course.grading.model_dump())
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        work = Path(tmp)
        with Gradebook(work / "grades.db") as gradebook, Sandbox(limits) as sandbox:
            # The zip's grading secret (write_gradescope_zip): each submission's own hidden inputs.
            judge = Judge(course, sandbox, source.resolve(), HiddenInputs(load_grading_secret(source, create=False)))
            run = grade_class(course, exercises, work, gradebook, judge, work / "work", jobs=2,
                              root=source.resolve(), sources={STUDENT: root / "submission"}, bare_modules=True)
            records = [r for r in (gradebook.get(k) for k in run.keys) if r is not None]
    return results_json(course, records, visibility=config.get("visibility", "visible"))


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "/autograder")
    try:
        results = grade_submission(root)
    except Exception:  # noqa: BLE001 - whatever broke, Gradescope must get a results.json
        traceback.print_exc(file=sys.stdout)   # stdout stays hidden from students
        results = {"score": 0, "tests": [], "stdout_visibility": "hidden",
                   "output": "The autograder could not grade this submission; please tell the course staff. "
                             "自动评分程序无法评分此次提交，请联系课程工作人员。"}
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, ensure_ascii=False, indent=1),
                                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
