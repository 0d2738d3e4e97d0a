"""Grade an exam: every student's answers and (when a sandbox is given) code,
with their own variant, and the late policy applied to the total.

Entry point for the grading pipeline: :func:`grade_exam`. It needs no
sandbox for the questions (answers are data; numeric keys come from the
references, run in a subprocess); the code part runs the exercises' hidden
checks, built for each student's variant, through the sandbox the caller
passes (``grader.sandbox.Sandbox``), one :func:`grader.exams.checks.variant_judge`
per student.

Submissions are laid out as for ``grader grade``: ``SUBMISSIONS/<student>/``
(the exam folder as built, or one level down) or ``SUBMISSIONS/<student>.zip``;
or as nbgrader collects them, ``submitted/<student>/<exam>-<student>/``
(grader/exams/nbgrader.py), of which only the student's own exam is graded.
Which files are a student's exam is grader/exams/intake.py's to decide.

One student's files never stop the class: every step that reads them (the
source, answers.yaml, the submission time, the code's collection and
grading) runs inside a boundary that turns any exception into that
student's problem, recorded once, with a fixed text; the student's status
(:attr:`ExamResult.status`) says ``unreadable`` when their exam could not be
read at all. Only faults of the grader itself (the sandbox, the references)
stop the run.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course
from grader.course.exam_schema import Exam
from grader.exams.answers import QuestionVerdict, grade_answers, grade_one, read_answers  # noqa: F401
from grader.exams.build import RosterEntry
from grader.exams.copying import CopySigns, code_matches, key_matches
from grader.exams.intake import ANSWERS_FILE, ExamSubmission, collect_exam, stage_code  # noqa: F401
from grader.exams.questions import answer_keys, shown_questions
from grader.exams.result import UNREADABLE, ExamResult
from grader.exams.timing import Stamp, assess, carried_records, find_stamp
from grader.exams.variants import Variant, make_variant
from grader.intake.identity import lookalike_groups, lookalike_note

@dataclass
class ExamRun:
    exam: Exam
    results: list[ExamResult]
    code_graded: bool
    problems: list[str] = field(default_factory=list)
    resumed: int = 0                   # exam exercises taken from the gradebook, not graded again
    copying: CopySigns = field(default_factory=CopySigns)   # signs to look at (also in problems), never a verdict


def _collect_code(course: Course, exercises: list, submission: ExamSubmission, workdir: Path,
                  root: Path) -> tuple[dict, list[str]]:
    """The student's exam exercises, prepared for grading from their exam
    folder alone (a copy of its modules and notebooks, nothing else), and
    what the copy skipped."""
    from grader.intake.submissions import collect

    staged = workdir / "exam-code" / submission.student
    skipped = stage_code(submission.tree, exercises, staged / submission.student)
    (found,) = collect(staged, course, exercises, workdir / "code" / submission.student, root)
    return found.exercises, skipped


def _unreadable_part(exercise, why: str) -> dict:
    return {"points": 0.0, "max_points": exercise.points, "status": UNREADABLE, "reason": why, "verdicts": []}


def _grade_code(course: Course, exam: Exam, submissions: dict[str, ExamSubmission], variants: dict[str, Variant],
                sandbox, workdir: Path, root: Path, jobs: int,
                book=None) -> tuple[dict[str, dict[str, dict]], int, dict[str, list[str]], dict[str, dict[str, str]]]:
    """Per student, per exercise: the hidden checks of the student's variant,
    how many of those results came from the gradebook, per student the
    problems met while reading their code, and the code itself (exercise id
    -> student -> module text, for :func:`grader.exams.copying.code_matches`).

    With a gradebook (``book``), parts already recorded are taken from it and
    each student's new parts are recorded as soon as the student is done
    (by this thread: the gradebook is not shared across threads). A part that
    cannot be read or graded is ``unreadable`` for that student and is not
    recorded (a rerun tries again)."""
    from grader.exams.checks import variant_judge
    from grader.exams.records import part_from_record, part_key, record_part
    from grader.judge import GraderError
    from grader.sandbox import SandboxError

    exercises = [course.exercise(item.id).model_copy(update={"points": item.points}) for item in exam.exercises]
    results: dict[str, dict[str, dict]] = {student: {} for student in variants}
    problems: dict[str, list[str]] = {}
    todo: dict[str, list[tuple]] = {}
    resumed = 0
    texts: dict[str, dict[str, str]] = {}
    for student in sorted(variants):
        try:
            parts, problems[student] = _student_code(course, exercises, submissions.get(student), workdir, root,
                                                     texts)
        except Exception as exc:  # noqa: BLE001 - the boundary: one student's files never stop the class
            why = f"the exam's code cannot be read ({type(exc).__name__})"
            problems[student] = [why]
            results[student] = {e.id: _unreadable_part(e, why) for e in exercises}
            continue
        for exercise in exercises:
            part = parts.get(exercise.id)
            key = part_key(course, exam, exercise.id, variants[student], part.content_hash if part else None)
            recorded = book.get(key) if book is not None else None
            if recorded is not None:
                results[student][exercise.id] = part_from_record(recorded)
                resumed += 1
            else:
                todo.setdefault(student, []).append((exercise, part, key))

    def grade_student(student: str) -> tuple[str, list[tuple]]:
        judge = variant_judge(course, sandbox, root, variants[student])
        graded = []
        for exercise, part, key in todo[student]:
            try:
                result = judge.grade(exercise, part.folder if part else None, workdir / "judge" / student)
            except (GraderError, SandboxError):
                raise                          # the grader cannot grade anyone: stop the run
            except Exception as exc:  # noqa: BLE001 - one student's part never stops the class
                graded.append((exercise.id, None, _unreadable_part(
                    exercise, f"the grader could not grade this part ({type(exc).__name__})")))
                continue
            graded.append((exercise.id, key, {
                "points": result.points, "max_points": result.max_points, "status": result.status,
                "reason": (part.problem if part else "") or result.reason,
                "verdicts": [v.to_dict() for v in result.verdicts]}))
        return student, graded

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(grade_student, student) for student in todo]):
            student, graded = future.result()
            for exercise_id, key, part in graded:
                if book is not None and key is not None:
                    record_part(book, key, part)
                results[student][exercise_id] = part
    return results, resumed, problems, texts


def _student_code(course: Course, exercises: list, submission: ExamSubmission | None, workdir: Path, root: Path,
                  texts: dict[str, dict[str, str]]) -> tuple[dict, list[str]]:
    """One student's exam exercises collected (:func:`_collect_code`; ({}, [])
    when no exam was found), and each module's text added to ``texts``."""
    if submission is None or submission.tree is None:
        return {}, []
    parts, problems = _collect_code(course, exercises, submission, workdir, root)
    for exercise_id, part in parts.items():
        if part.folder is not None:
            module = next(e.module for e in exercises if e.id == exercise_id)
            texts.setdefault(exercise_id, {})[submission.student] = (part.folder / module).read_text(
                encoding="utf-8", errors="replace")
    return parts, problems


def _code_texts(course: Course, exam: Exam, submissions: dict[str, ExamSubmission], workdir: Path,
                root: Path) -> dict[str, dict[str, str]]:
    """The code of every student's exam exercises, when it is not graded (an
    answers-only run): collected as for grading, for the alike-code list only."""
    exercises = [course.exercise(item.id) for item in exam.exercises]
    texts: dict[str, dict[str, str]] = {}
    for student in sorted(submissions) if exercises else []:
        try:
            _student_code(course, exercises, submissions[student], workdir, root, texts)
        except Exception:  # noqa: BLE001 - unreadable code is named where it is graded; here it is just not compared
            continue
    return texts


def _copy_signs(course: Course, exam: Exam, keys: dict, shown: dict, answers: dict, verdicts: dict,
                texts: dict[str, dict[str, str]], root: Path) -> CopySigns:
    """Answers on another student's key and alike code (grader/exams/copying.py)."""
    from grader.run.similarity import given_code

    exercises = [course.exercise(item.id) for item in exam.exercises]
    code, notes = code_matches(exercises, texts, {e.id: given_code(e, root) for e in exercises}) \
        if exercises else ([], [])
    return CopySigns(key_matches(keys, shown, answers, verdicts), code, notes)


def _shown_text(raw: object) -> str:
    """What the student wrote, shortened, for the instructor's review list."""
    try:
        return str(raw)[:80]
    except Exception:  # noqa: BLE001 - whatever the answer holds
        return "?"


def _grade_questions(shown: list, keys: dict, answers: dict) -> list[QuestionVerdict]:
    """grade_answers, one question at a time inside a boundary: an answer
    the grader cannot take costs that question, never the others."""
    verdicts = []
    for question in shown:
        key = keys[question.id]
        try:
            verdicts.append(grade_one(question, key, answers.get(question.id)))
        except Exception:  # noqa: BLE001 - a student's answer, whatever it holds
            verdicts.append(QuestionVerdict(key.question_id, key.kind, 0.0, key.points, False, True,
                                            _shown_text(answers.get(question.id)), key.display(),
                                            reason="the answer cannot be read", review=True))
    return verdicts


def _read_student(submission: ExamSubmission, exam: Exam, manifest: dict[str, Stamp] | None,
                  trust_file_times: bool) -> tuple[dict, Stamp, list[str], str]:
    """(answers, submission time, problems, error) of one student: every
    fault of their files is caught here and named once."""
    problems, error, answers = [], submission.refused, {}
    if submission.entry is None:
        return answers, Stamp(None, None, "none"), ["nothing submitted"], error
    if submission.tree is not None and exam.questions:
        try:
            answers, answer_problems = read_answers(submission.answers_path)
            problems += answer_problems
        except Exception as exc:  # noqa: BLE001 - the boundary around answers.yaml
            error = error or f"{ANSWERS_FILE} cannot be read ({type(exc).__name__})"
    stamp = Stamp(None, None, "none")
    if submission.tree is not None and not error:            # nothing to time when nothing can be graded
        try:
            # Each source is timed as itself: a zip by the manifest (or its own
            # file time), never by a record it carries, which may be an earlier
            # folder's on-time stamp zipped with later answers.
            folder = _is_folder(submission.entry)
            stamp, problem = find_stamp(submission.entry, submission.student, exam, manifest,
                                        nbgrader_folder=submission.tree if submission.nbgrader and folder else None,
                                        trust_file_times=trust_file_times)
            problems += [problem] if problem else []
            if not folder and stamp.source != "manifest":
                problems += carried_records(submission.tree, submission.entry.name)
        except Exception as exc:  # noqa: BLE001 - the boundary around the submission time
            problems.append(f"the submission time cannot be read ({type(exc).__name__}); lateness unknown")
    return answers, stamp, problems, error


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def grade_exam(course: Course, exam: Exam, submissions_dir: Path, *, secret: bytes, root: Path, workdir: Path,
               roster: list[RosterEntry] | None = None, manifest: dict[str, Stamp] | None = None,
               sandbox=None, jobs: int = 1, gradebook=None, trust_file_times: bool = False,
               on_result: Callable[[ExamResult], None] | None = None) -> ExamRun:
    """Grade every student of the roster (and anyone else who submitted).

    Without ``sandbox`` only the questions are graded (``ExamRun.code_graded``
    is False and the code points count neither way). With ``gradebook``
    (a ``grader.gradebook.Gradebook``) every result is recorded there and a
    rerun grades only what is not recorded yet (grader/exams/records.py).
    ``trust_file_times``: without a record of the submission time, take the
    newest file time (which the student controls) rather than "unknown"."""
    submissions, run_problems = collect_exam(submissions_dir, workdir, course, exam)
    extra = {entry.student: entry.extra_time_min for entry in roster or []}
    students = list(dict.fromkeys([*(e.student for e in roster or []), *sorted(submissions)]))
    run_problems += [f"{s}: submitted but not on the roster" for s in submissions if roster is not None and s not in extra]
    # One identity rule for watch, grade and exams (grader/intake/identity.py):
    # `ana` beside `Ana` or `аna` (Cyrillic а) is flagged, never two students in silence.
    run_problems += [lookalike_note(ids) for ids in lookalike_groups(students)]
    variants = {s: make_variant(course, exam, s, secret) for s in students}
    keys = answer_keys(course, exam, list(variants.values()), root)
    code_graded = sandbox is not None and bool(exam.exercises)
    code, resumed, code_problems, texts = (
        _grade_code(course, exam, submissions, variants, sandbox, workdir, root, jobs, gradebook) if code_graded
        else ({}, 0, {}, _code_texts(course, exam, submissions, workdir, root)))
    code_max = sum(item.points for item in exam.exercises)
    results = []
    shown = {student: shown_questions(course, exam, variants[student]) for student in students}
    answers_of, verdicts_of = {}, {}
    for student in students:
        submission = submissions.get(student, ExamSubmission(student, None))
        answers, stamp, problems, error = _read_student(submission, exam, manifest, trust_file_times)
        problems = [*submission.problems, *code_problems.get(student, []), *problems]
        verdicts = _grade_questions(shown[student], keys[student], answers)
        submitted = submission.entry is not None and submission.handed_in
        if submitted and not error and answers:
            answers_of[student], verdicts_of[student] = answers, verdicts
        result = ExamResult(student, dict(variants[student].sizes), verdicts, code.get(student, {}),
                            assess(exam, stamp, extra.get(student, 0.0)), problems,
                            code_graded=code_graded, code_max=code_max, submitted=submitted, error=error)
        results.append(result)
        if gradebook is not None:
            from grader.exams.records import record_total

            record_total(gradebook, course, exam, result, variants[student])
        if on_result is not None:
            on_result(result)
    copying = _copy_signs(course, exam, keys, shown, answers_of, verdicts_of, texts, root)
    return ExamRun(exam, results, code_graded=code_graded, problems=run_problems + copying.problems(),
                   resumed=resumed, copying=copying)
