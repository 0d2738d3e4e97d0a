"""What every attack corpus under tests/redteam/ shares: grade a folder of
submissions end to end with `grader grade`, and hold each result to its
expected outcome.

An expected outcome (one entry of a corpus's ``expected.yaml``) says:
  max_points: the most it may score (min_points: the least, where given)
  status:     the result's status in results.json (one, or a list)
  reason:     a substring of the result's reason ("" when graded normally)
"""
from __future__ import annotations

import json
from pathlib import Path

from classrun import grade_cli

Results = dict[tuple[str, str], dict]


def grade_folder(submissions: Path, root: Path, *extra: str, exercises: tuple[str, ...] = ("01",),
                 timeout_s: int = 900) -> tuple[Results, str]:
    """Grade ``submissions`` into ``root`` (grades.db, out/); return the
    results by (student, exercise) and the command's output. The run itself
    must succeed: one student's attack never stops the class."""
    run = grade_cli(submissions, root / "grades.db", root / "out", *extra, exercises=exercises)
    output = run.communicate(timeout=timeout_s)[0]
    assert run.returncode == 0, output
    rows = json.loads((root / "out" / "results.json").read_text())
    return {(r["student"], r["exercise"]): r for r in rows}, output


def assert_outcome(result: dict, expected: dict) -> None:
    """``result`` (a results.json row) is what ``expected`` allows."""
    assert expected.get("min_points", 0) <= result["points"] <= expected["max_points"], result
    statuses = expected["status"] if isinstance(expected["status"], list) else [expected["status"]]
    assert result["status"] in statuses, result
    assert expected.get("reason", "") in result["reason"], result
    if result["status"] == "graded" and result["points"] < result["max_points"]:
        # Graded normally: a failed check says why, without the hidden values.
        assert any(not c["passed"] and c["reason"] for c in result["checks"]), result
