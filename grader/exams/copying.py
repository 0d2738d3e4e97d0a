"""Signs of copying in one exam, for the instructor to look at: never a
verdict, and no point changes for them.

- **Another student's key.** Each student's numbers and choice orders are
  their own (grader/exams/variants.py), so an answer that is wrong for the
  student's own variant but exactly right for someone else's is what a
  student who copied another's answers (or their whole folder, keeping his
  own ``variant.json``) hands in. One such answer can be chance: a choice
  has few letters, and a common mistake can land on a value another variant
  has. So a pair (student, other) is listed when at least
  :data:`MIN_MATCHES` answers match the other's key and not the student's
  own, and so many matches are unlikely by chance: at most
  :data:`CHANCE_LIMIT` for the pair (:func:`chance_of`, a bound that
  assumes each wrong answer falls on the other's key with a generous
  probability: ``1/(choices - 1)`` for a choice, the share of the class
  whose key is the same and at least :data:`MIN_CHANCE` for a number or a
  word). In simulated classes of honest students (random wrong letters,
  numbers off by one, doubled, halved or rounded; 30 to 120 students) no
  pair came under 0.005, and a student who copied the folder of one who got
  two thirds right came under 1e-4; a copy of a weak student's answers
  matches few keys and may go unlisted (tests/test_exam_copying.py).
- **Alike code**: each exam exercise's modules compared across the class
  as ``grader similarity`` compares homework (grader/report/similarity.py;
  the stub the exam folder ships is boilerplate).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from grader.exams.answers import QuestionVerdict, grade_one
from grader.exams.questions import AnswerKey, ShownQuestion

MIN_MATCHES = 2         # one answer on another's key is never listed alone
CHANCE_LIMIT = 1e-3     # a pair is listed when its matches are at most this likely by chance
MIN_CHANCE = 0.05       # a number or word: the least chance that a mistake lands on another's key


@dataclass(frozen=True)
class KeyMatch:
    """``student`` answered ``questions`` with ``other``'s key, not their own."""

    student: str
    other: str
    questions: list[str]
    possible: int            # questions where that could happen (answered, wrong for the student, keys differ)
    chance: float            # at most this likely for an honest student and this other (one pair)

    def describe(self) -> str:
        return (f"{self.student} answered {len(self.questions)} of {self.possible} question(s) with {self.other}'s "
                f"answer key, wrong for their own variant ({', '.join(self.questions)}; chance at most "
                f"{self.chance:.1e}): a sign of copying to look at, not a verdict")


@dataclass(frozen=True)
class CodeMatch:
    """Two students' code for one exam exercise, alike (grader/report/similarity.py's shares)."""

    exercise: str
    first: str
    second: str
    first_covered: float
    second_covered: float

    def describe(self) -> str:
        return (f"{self.first} and {self.second}: exercise {self.exercise} code alike ({self.first_covered:.0%} / "
                f"{self.second_covered:.0%} of each one's own code found in the other): a sign of copying to "
                "look at, not a verdict")


@dataclass
class CopySigns:
    """What an exam run lists for the instructor to look at."""

    key_matches: list[KeyMatch] = field(default_factory=list)
    code_matches: list[CodeMatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # a part not computed, and why

    def problems(self) -> list[str]:
        return [m.describe() for m in self.key_matches] + [m.describe() for m in self.code_matches] + self.notes

    def to_dict(self) -> dict:
        return {"key_matches": [asdict(m) for m in self.key_matches],
                "code_matches": [asdict(m) for m in self.code_matches], "notes": self.notes}


def _key_id(key: AnswerKey) -> tuple:
    """What makes two keys the same answer (letters, value or accepted words)."""
    return key.kind, key.letters, key.value, key.accept


def chance_of(probabilities: list[float], matches: int) -> float:
    """P(at least ``matches`` of independent events with these probabilities)."""
    at = [1.0] + [0.0] * len(probabilities)         # at[k]: P(exactly k so far)
    for p in probabilities:
        for k in range(len(at) - 1, 0, -1):
            at[k] = at[k] * (1 - p) + at[k - 1] * p
        at[0] *= 1 - p
    return min(1.0, sum(at[matches:]))


def key_matches(keys: Mapping[str, Mapping[str, AnswerKey]], shown: Mapping[str, list[ShownQuestion]],
                answers: Mapping[str, Mapping[str, object]],
                verdicts: Mapping[str, list[QuestionVerdict]]) -> list[KeyMatch]:
    """The pairs (student, other) of :class:`KeyMatch`, most unlikely first.

    ``keys`` and ``shown``: every student of the class (the roster's too, who
    may not have handed in: a folder can be copied from anyone); ``answers``
    and ``verdicts``: those who handed in answers, as read and graded."""
    students = sorted(keys)
    question_ids = sorted({q for student_keys in keys.values() for q in student_keys})
    # Per question, the class's keys grouped: one grading of an answer per distinct key.
    groups: dict[str, dict[tuple, list[str]]] = {}
    for qid in question_ids:
        for student in students:
            if qid in keys[student]:
                groups.setdefault(qid, {}).setdefault(_key_id(keys[student][qid]), []).append(student)
    questions_of = {student: {q.id: q for q in shown[student]} for student in students}
    found = []
    for student in sorted(answers):
        wrong = {v.question_id for v in verdicts.get(student, []) if v.answered and not v.correct}
        hits: dict[str, set[tuple]] = {}     # question -> the others' keys the answer is right for
        for qid in sorted(wrong):
            own = _key_id(keys[student][qid])
            for key_id, holders in groups.get(qid, {}).items():
                if key_id != own and _right_for(questions_of[holders[0]][qid], keys[holders[0]][qid],
                                                answers[student].get(qid)):
                    hits.setdefault(qid, set()).add(key_id)
        if len(hits) < MIN_MATCHES:
            continue
        for other in students:
            if other == student:
                continue
            possible = [q for q in sorted(wrong) if q in keys[other] and _key_id(keys[other][q]) != _key_id(keys[student][q])]
            matched = [q for q in possible if _key_id(keys[other][q]) in hits.get(q, ())]
            if len(matched) < MIN_MATCHES:
                continue
            chance = chance_of([_chance(questions_of[student][q], keys[other][q], groups[q], len(students))
                                for q in possible], len(matched))
            if chance <= CHANCE_LIMIT:
                found.append(KeyMatch(student, other, matched, len(possible), chance))
    return sorted(found, key=lambda m: (m.chance, m.student, m.other))


def _right_for(question: ShownQuestion, key: AnswerKey, answer: object) -> bool:
    try:
        return grade_one(question, key, answer).correct
    except Exception:  # noqa: BLE001 - an answer the grader cannot take matches no key
        return False


def _chance(question: ShownQuestion, key: AnswerKey, groups: Mapping[tuple, list[str]], class_size: int) -> float:
    """How likely a wrong answer falls on ``key`` by chance (generously)."""
    share = len(groups.get(_key_id(key), [])) / max(1, class_size)
    if key.kind == "choice":
        return max(share, 1.0 / max(1, len(question.choices) - 1))
    return max(share, MIN_CHANCE)


def code_matches(exam_exercises: list, texts: Mapping[str, Mapping[str, str]], boilerplate: Mapping[str, list[str]],
                 threshold: float | None = None) -> tuple[list[CodeMatch], list[str]]:
    """Alike code per exam exercise (``texts``: exercise id -> student ->
    module text), and a note when it could not be computed (copydetect is
    in the [grader] extra): never raises."""
    try:
        from grader.report.similarity import DEFAULT_THRESHOLD, similar_pairs
    except ImportError as exc:
        return [], [f"alike code not looked for: {exc.name or exc} is not installed"]
    matches = []
    for exercise in exam_exercises:
        try:
            report = similar_pairs(exercise.id, texts.get(exercise.id, {}), boilerplate.get(exercise.id, []),
                                   DEFAULT_THRESHOLD if threshold is None else threshold)
        except Exception as exc:  # noqa: BLE001 - the grades stand; say why this list is missing
            return matches, [f"alike code not looked for: {type(exc).__name__}"]
        matches += [CodeMatch(exercise.id, p.first, p.second, p.first_covered, p.second_covered)
                    for p in report.pairs]
    return matches, []
