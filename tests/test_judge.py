"""The judge on real sandboxed runs: verdicts come from comparing plain data
with the reference, stubs get no hints, pitfalls are confirmed by variants,
and the grader refuses to grade without filesystem isolation."""
import re

import pytest

from grader.course import REPO_ROOT
from grader.judge import GraderError, Judge
from grader.sandbox import Limits, Sandbox
from grader.intake.submissions import assemble
from hidden_values import graded_values


# `judge`: conftest's session judge (the course's limits, references run once).


def _grade(judge, exercise, source: str, tmp_path):
    folder = assemble(exercise, source.encode(), tmp_path / "submission", judge.course)
    return judge.grade(exercise, folder, tmp_path / "work")


def test_untouched_stub_scores_zero_without_hints(course, judge, tmp_path):
    exercise = course.exercise("01")
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text()
    result = _grade(judge, exercise, stub, tmp_path)
    assert result.points == 0 and result.status == "not_started"
    assert {v.reason for v in result.verdicts} <= {"not implemented yet", "counts once 01-random-shapes passes"}
    assert result.pitfalls == []


def test_a_variant_is_confirmed_as_its_own_pitfall(course, judge, tmp_path):
    from grader.course.pitfalls import load_variants

    exercise = course.exercise("01")
    variant = load_variants(exercise, REPO_ROOT)["softmax-overflow"]
    result = _grade(judge, exercise, variant.source, tmp_path)
    failed = [v for v in result.verdicts if not v.passed]
    assert 0 < result.points < exercise.points
    assert all(v.confirmed == ["softmax-overflow"] for v in failed), [(v.check_id, v.confirmed) for v in failed]


def test_a_correct_solution_written_differently_gets_full_marks(course, judge, tmp_path):
    source = (
        "import torch\n\n\n"
        "def softmax(x, dim=-1):\n"
        "    finite = torch.where(torch.isinf(x), torch.full_like(x, -1e30), x)\n"
        "    e = torch.exp(x - finite.max(dim=dim, keepdim=True).values)\n"
        "    s = e.sum(dim=dim, keepdim=True)\n"
        "    return torch.where(s > 0, e / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(e))\n"
    )
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    assert result.points == pytest.approx(10), [(v.check_id, v.reason) for v in result.verdicts if not v.passed]


def test_messages_and_reasons_reveal_no_hidden_value(course, judge, tmp_path):
    source = "import torch\n\n\ndef softmax(x, dim=-1):\n    raise ValueError(f'shape {tuple(x.shape)} values {x.tolist()}')\n"
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    folder = tmp_path / "submission"
    shown = repr([{k: v for k, v in verdict.to_dict().items() if k != "instructor_detail"}
                  for verdict in result.verdicts])
    # The message shown is the one raised on ungraded inputs of the same kind
    # (grader/own_errors.py): nothing of the graded inputs.
    assert not set(re.findall(r"-?\d+\.\d{6,}", shown)) & graded_values(judge, course.exercise("01"), folder)
    # The instructor may read the raw error; it lives in its own field only.
    assert any("values [" in v.instructor_detail for v in result.verdicts)
    assert all(v.reason.startswith("raised ValueError") for v in result.verdicts
               if v.reason != "counts once 01-random-shapes passes")


def test_grading_without_filesystem_isolation_is_refused(course, monkeypatch):
    class Unconfined:
        def layers(self):
            return {"landlock": "missing: kernel too old", "filesystem_view": "missing: no mount namespace"}

    with pytest.raises(GraderError, match="cannot hide solutions"):
        Judge(course, Unconfined())


def test_a_module_that_cannot_be_imported_gets_its_reason_and_no_hints(course, judge, tmp_path):
    result = _grade(judge, course.exercise("01"), "def softmax(x, dim=-1)\n    return x\n", tmp_path)
    assert result.status == "import_error" and "syntax error on line 1" in result.reason
    assert result.points == 0 and result.pitfalls == []


def test_feedback_figures_come_from_public_inputs_only(course, judge, tmp_path):
    exercise = course.exercise("03")
    reference = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    result = _grade(judge, exercise, reference, tmp_path)
    figure = result.figures["causal-weights"]
    assert figure["student"] == figure["expected"] and len(figure["expected"]) == 6
    # Above the diagonal the causal weights are zero: a real picture, not noise.
    assert all(figure["expected"][i][j] == 0 for i in range(6) for j in range(i + 1, 6))
    stub = (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text()
    assert _grade(judge, exercise, stub, tmp_path / "stub").figures["causal-weights"]["student"] is None


# --- feedback in fixed words (issue 13 class 4, issue 14) ---------------------

def _failed(result):
    return {v.check_id: v for v in result.verdicts if not v.passed}


def _student_facing(result) -> str:
    return repr([result.status, result.reason,
                 *({k: v for k, v in verdict.to_dict().items() if k != "instructor_detail"}
                   for verdict in result.verdicts)])


def test_a_class_the_submission_defines_is_never_named(course, judge, tmp_path):
    source = ("import torch\n\n\nclass Secret_0_4375(Exception):\n    pass\n\n\n"
              "def softmax(x, dim=-1):\n    raise Secret_0_4375()\n")
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    assert "Secret" not in _student_facing(result)
    assert "raised an exception of a class defined in your code" in _failed(result)["01-random-shapes"].reason


def test_a_syntax_error_is_located_here_by_parsing_and_said_once(course, judge, tmp_path):
    source = "import torch\n\n\ndef softmax(x, dim=-1):\n    return (x\n\n\nvalue = 'unused'\n"
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    line, column = 5, 12  # Python's parser, run here: the unclosed parenthesis
    try:
        compile(source, "softmax.py", "exec")
    except SyntaxError as exc:
        line, column = exc.lineno, exc.offset
    assert result.status == "import_error"
    assert f"syntax error on line {line}, column {column}" in result.reason and "第" in result.reason
    # Once, at the exercise: each check only says it could not run.
    assert {v.reason for v in result.verdicts} == {"could not run (see the exercise's note)"}
    assert {v.kind for v in result.verdicts} == {"not_run"}


def test_a_missing_name_is_found_in_the_source_and_named_from_the_stub(course, judge, tmp_path):
    source = "import torch\n\n\ndef softmx(x, dim=-1):\n    return x.exp() / x.exp().sum(dim, keepdim=True)\n"
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    assert "softmax.py defines no 'softmax' at its top level" in result.reason
    assert all(v.kind == "missing_name" and not v.pitfalls for v in _failed(result).values()
               if v.kind != "requires")


def test_a_timeout_says_the_course_limit_once_and_names_no_probe(course, tmp_path):
    limits = Limits(**(course.grading.model_dump() | {"timeout_s": 4.0}))
    source = "import time\n\n\ndef softmax(x, dim=-1):\n    time.sleep(60)\n"
    with Sandbox(limits) as box:
        result = _grade(Judge(course, box), course.exercise("01"), source, tmp_path)
    assert result.status == "timeout"
    assert "timed out after 4 s (the course's limit) during call 1 of" in result.reason
    assert "in check 01-random-shapes" in result.reason
    assert "coursekit.probes" not in _student_facing(result) and "coursekit.probes" in result.detail
    assert {v.kind for v in result.verdicts} == {"not_run"}


def test_running_out_of_memory_names_the_course_limit_not_pytorch(course, judge, tmp_path):
    source = "import torch\n\n\ndef softmax(x, dim=-1):\n    return torch.empty(1 << 40, dtype=torch.float64)\n"
    result = _grade(judge, course.exercise("01"), source, tmp_path)
    memory_mb = course.grading.memory_mb
    assert f"used more than {memory_mb} MiB, the course's memory limit" in result.reason
    assert "DefaultCPUAllocator" not in _student_facing(result) and "allocate" not in _student_facing(result)
    assert _failed(result)["01-random-shapes"].reason == f"used more than {memory_mb} MiB, the course's memory limit"


def test_shape_errors_give_shapes_as_symbols_and_raised_ones_their_kind(course, judge, tmp_path):
    import re

    wrong_shape = "import torch\n\n\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim).unsqueeze(0)\n"
    reason = _failed(_grade(judge, course.exercise("01"), wrong_shape, tmp_path / "a"))["01-random-shapes"].reason
    match = re.search(r"wrong shape: expected shape(?: of \w+)? \(([a-z, ]+)\), yours \(([a-z, ]+)\), "
                      r"for inputs x \(([a-z, ]+)\)$", reason)
    assert match, reason  # letters only: the hidden sizes never appear
    expected, yours, given = (re.findall(r"[a-z]", group) for group in match.groups())
    assert len(yours) == len(expected) + 1 and yours[1:] == expected  # one extra leading dimension
    assert given == expected  # softmax keeps its input's shape: the same letters
    product = "import torch\n\n\ndef softmax(x, dim=-1):\n    return x @ torch.ones(x.shape[-1] + 3, 2)\n"
    failed = _failed(_grade(judge, course.exercise("01"), product, tmp_path / "b"))
    # The graded input's shape in letters; then (grader/own_errors.py) where it was raised and, from an
    # ungraded replay of that kind, the message with its own sizes.
    assert re.match(r"a shape error in a product: .* \(inputs x \([a-z, ]+\)\)( in softmax\.py, line \d+)?, on ",
                    failed["01-random-shapes"].reason)
    assert failed["01-random-shapes"].kind == "shape error (matmul)"


def _two_mistakes_03() -> str:
    """The reference of 03 with two mistakes: no 1/sqrt(d_k), and -1e9 for blocked keys."""
    source = (REPO_ROOT / "solutions" / "03_masking" / "attention.py").read_text()
    for old, new in (("scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)", "scores = query @ key.transpose(-2, -1)"),
                     ('scores = scores.masked_fill(mask, float("-inf"))', "scores = scores.masked_fill(mask, -1e9)")):
        assert source.count(old) == 1
        source = source.replace(old, new)
    return source


def test_a_two_mistake_submission_gets_each_mistake_once_where_it_shows(course, judge, tmp_path):
    """The before/after pair of issue 14: before, `missing-scale` was shown on
    nine checks and `mask-minus-1e9` never on the fully-blocked-row failure."""
    from grader.gradebook import Gradebook, Key
    from grader.report import write_html_report

    exercise = course.exercise("03")
    result = _grade(judge, exercise, _two_mistakes_03(), tmp_path)
    failed = _failed(result)
    assert "missing-scale" in failed["03-random-shapes"].confirmed  # no mask: only the scale differs
    blocked = failed["03-fully-blocked-rows"]
    assert "mask-minus-1e9" in blocked.possible and not blocked.confirmed
    # The NaN variant fails that check another way (NaN, not wrong values): not offered.
    assert "softmax-all-masked-nan" not in blocked.pitfalls
    assert all(len(v.possible) <= 2 for v in failed.values())
    # Where a confirmed mistake can explain a failure, it is the only one offered there.
    assert not failed["03-random-shapes"].possible and failed["03-gradients"].possible == ["missing-scale"]
    with Gradebook(tmp_path / "grades.db") as book:
        key = Key("two", "03", "h", course.course.version)
        book.record(key, points=result.points, max_points=result.max_points, status=result.status,
                    reason=result.reason, verdicts=[v.to_dict() for v in result.verdicts], figures=result.figures)
        write_html_report(course, [book.get(key)], tmp_path / "report")
    page = (tmp_path / "report" / "students" / "two.html").read_text(encoding="utf-8")
    from markupsafe import escape

    hint = str(escape(course.pitfall("missing-scale").hint.en))
    assert page.count(hint) == 1 and page.count("confirmed · 已确认 [missing-scale]") == 1
    assert page.index("[missing-scale]") < page.index('class="check"')  # confirmed first, above the checks
    fully_blocked = page[page.index("(03-fully-blocked-rows:"):]
    fully_blocked = fully_blocked[:fully_blocked.index("</div>")]
    assert "[mask-minus-1e9]" in fully_blocked
    assert page.count(str(escape(course.pitfall("mask-minus-1e9").hint.en))) == 1
