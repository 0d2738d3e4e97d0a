"""Signs of copying in one exam, for the instructor to look at: never a
verdict, and no point changes for them.

- **Another student's key.** Each student's numbers and choice orders are
  their own (grader/exams/variants.py), so an answer that is wrong for the
  student's own variant but exactly right for someone else's is what a
  student who copied another's answers (or their whole folder, keeping his
  own ``variant.json``) hands in. One such answer can be chance: a choice
  has few letters, and a common mistake can land on a value another variant
  has. A copy of a weak student also holds the other's own wrong answers:
  the same wrong answer counts too. So a pair (student, other) is listed
  when at least :data:`MIN_MATCHES` of the student's wrong answers are the
  other's (on the other's key, or the other's own wrong answer), on
  questions whose keys differ, and so many are unlikely by chance: at most
  :data:`CHANCE_LIMIT` for the pair (:func:`chance_of`, a bound that gives
  each question a generous chance: ``1/(choices - 1)`` for a choice, for a
  number or a word the share of the class whose key is the other's, and of
  those who handed in that wrong answer, each at least :data:`MIN_CHANCE`;
  a common mistake is weak evidence). In simulated classes (30 and 120
  students; honest ones at 20 to 80 % with random wrong letters and numbers
  off by one, doubled, halved, rounded, 0 or 1) no honest pair was listed,
  and every student who copied another's answers was, whatever the other's
  score. Identical answers list both directions (the one copied from, too):
  who copied is for the instructor to find out.
- **Alike code**: each exam exercise's modules compared across the class
  as ``grader similarity`` compares homework (grader/report/similarity.py;
  the stub the exam folder ships is boilerplate).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from grader.exams.answers import QuestionVerdict, grade_one, normalize_short, parse_letters, parse_numbers
from grader.exams.questions import AnswerKey, ShownQuestion

MIN_MATCHES = 2         # one answer on another's key is never listed alone
CHANCE_LIMIT = 1e-3     # a pair is listed when its matches are at most this likely by chance
MIN_CHANCE = 0.05       # a number or word: the least chance that a mistake lands on another's key


@dataclass(frozen=True)
class KeyMatch:
    """``student`` answered ``questions`` with ``other``'s key, not their own."""

    student: str
    other: str
    questions: list[str]     # answered with the other's key
    possible: int            # questions where that could happen (answered, wrong for the student, keys differ)
    chance: float            # at most this likely for an honest student and this other (one pair)
    same_mistakes: list[str] = field(default_factory=list)   # answered with the other's own wrong answer

    def describe(self) -> str:
        """One line (the summary cuts lines at 300 characters; the report lists every question)."""
        shown = [*self.questions, *self.same_mistakes]
        listed = ", ".join(shown[:3]) + (f", +{len(shown) - 3}" if len(shown) > 3 else "")
        return (f"{self.student} answered {len(shown)} of {self.possible} question(s) as {self.other} did, wrong for "
                f"their own variant: {len(self.questions)} on {self.other}'s answer key, {len(self.same_mistakes)} "
                f"with {self.other}'s own wrong answer ({listed}); chance at most {self.chance:.1e}: a sign of "
                "copying to look at, not a verdict")


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
    questions_of = {student: {q.id: q for q in shown[student]} for student in students}
    groups = _key_groups(keys, students)
    wrong = {s: {v.question_id for v in verdicts.get(s, []) if v.answered and not v.correct} for s in answers}
    forms = {s: {q: _form(keys[s][q].kind, answers[s].get(q)) for q in wrong[s]} for s in answers}
    # Per question, each wrong answer's form -> who gave it (an answer many gave is weak evidence).
    gave: dict[str, dict[object, list[str]]] = {}
    for s in sorted(answers):
        for qid, form in forms[s].items():
            if form is not None:
                gave.setdefault(qid, {}).setdefault(form, []).append(s)
    found = []
    for student in sorted(answers):
        candidates: dict[str, int] = {}      # other -> questions where the student's answer is the other's
        on_key: dict[str, set[tuple]] = {}   # question -> the others' keys the answer is right for
        for qid in sorted(wrong[student]):
            own, answer = _key_id(keys[student][qid]), _read_once(keys[student][qid].kind, answers[student].get(qid))
            for key_id, holders in groups.get(qid, {}).items():
                if key_id != own and answer is not None and _right_for(questions_of[holders[0]][qid],
                                                                       keys[holders[0]][qid], answer):
                    on_key.setdefault(qid, set()).add(key_id)
                    for other in holders:
                        candidates[other] = candidates.get(other, 0) + 1
            for other in gave.get(qid, {}).get(forms[student][qid], []):
                candidates[other] = candidates.get(other, 0) + 1
        for other in sorted(o for o, n in candidates.items() if n >= MIN_MATCHES and o != student):
            match = _pair(student, other, keys, questions_of, groups, wrong, forms, gave, on_key, len(students),
                          len(answers))
            if match is not None:
                found.append(match)
    return sorted(found, key=lambda m: (m.chance, m.student, m.other))


def _key_groups(keys: Mapping[str, Mapping[str, AnswerKey]], students: list[str]) -> dict[str, dict[tuple, list[str]]]:
    """Per question, the class's keys grouped: one grading of an answer per distinct key."""
    groups: dict[str, dict[tuple, list[str]]] = {}
    for student in students:
        for qid, key in keys[student].items():
            groups.setdefault(qid, {}).setdefault(_key_id(key), []).append(student)
    return groups


def _pair(student: str, other: str, keys, questions_of, groups, wrong, forms, gave, on_key, class_size: int,
          handed_in: int) -> KeyMatch | None:
    """The student's answers that are ``other``'s, where they could not be by
    being right: on ``other``'s key, or ``other``'s own wrong answer."""
    possible = [q for q in sorted(wrong[student])
                if q in keys[other] and _key_id(keys[other][q]) != _key_id(keys[student][q])]
    on_their_key, their_mistake, chances = [], [], []
    for qid in possible:
        question, key = questions_of[student][qid], keys[other][qid]
        chance = _chance(question, key, groups[qid], class_size)
        if _key_id(key) in on_key.get(qid, ()):
            on_their_key.append(qid)
        theirs = forms.get(other, {}).get(qid)
        if theirs is not None:               # the other answered wrongly: the same wrong answer is a sign too
            share = len(gave[qid][theirs]) / max(1, handed_in)
            chance += max(share, 1.0 / max(1, len(question.choices) - 1) if key.kind == "choice" else MIN_CHANCE)
            if theirs == forms[student][qid] and qid not in on_their_key:
                their_mistake.append(qid)
        chances.append(min(1.0, chance))
    matched = len(on_their_key) + len(their_mistake)
    if matched < MIN_MATCHES:
        return None
    chance = chance_of(chances, matched)
    return KeyMatch(student, other, on_their_key, len(possible), chance, their_mistake) \
        if chance <= CHANCE_LIMIT else None


def _form(kind: str, answer: object) -> object:
    """An answer in a form two students' answers compare in (letters,
    numbers to 6 significant digits, normalised words); None if unreadable."""
    try:
        if kind == "choice":
            letters = parse_letters(answer)
            return tuple(letters) if letters else None
        if kind == "numeric":
            number = parse_numbers(answer)
            values = number if isinstance(number, list) else [number] if number is not None else None
            return tuple(float(f"{v:.6g}") for v in values) if values else None
        return normalize_short(answer) or None
    except Exception:  # noqa: BLE001 - an answer the grader cannot read compares with nothing
        return None


def _read_once(kind: str, answer: object) -> object:
    """A number's answer read once (the grader reads a number it is given as
    itself), not once per key of the class; None: no key can accept it."""
    if kind != "numeric" or answer is None:
        return answer
    try:
        return parse_numbers(answer)
    except Exception:  # noqa: BLE001 - an answer the grader cannot read matches no key
        return None


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
