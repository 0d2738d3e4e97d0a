"""Per-student variants, derived from a secret.

A student's variant is a pure function of (exam secret, course id, exam id,
student id): the instructor can reproduce it at any time
(``grader exam variant EXAM STUDENT``), and without the secret nobody can
predict it, so students cannot compute or share each other's expected values.

Everything is drawn from one per-student key, ``HMAC-SHA256(secret,
course/exam/student)``, by labelled draws ``HMAC-SHA256(key, label)``: each
size, parameter and choice order has its own label, so adding a question
does not change the sizes already drawn, and no Python or library random
generator (whose algorithms may change between versions) is involved.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import Course
from grader.course.exam_schema import Exam, SizeSpec
from grader.exams.expr import Number, as_int, evaluate, names

SECRET_MIN_BYTES = 16
_DOMAIN = b"attention-course/exam-variant/v1"


class ExamSecretError(Exception):
    """No usable exam secret; the message says where one is looked for."""


def load_secret(course: Course, root: Path) -> bytes:
    """The exam secret: ``$<exam_settings.secret_env>``, else the file
    ``exam_settings.secret_file`` (relative to ``root``, the folder of course.yaml)."""
    settings = course.exam_settings
    value = os.environ.get(settings.secret_env, "").strip()
    where = [f"${settings.secret_env}"]
    if value:
        secret = value.encode("utf-8")
    elif settings.secret_file:
        path = Path(settings.secret_file).expanduser()
        path = path if path.is_absolute() else root / path
        where.append(str(path))
        if not path.is_file():
            raise ExamSecretError(f"no exam secret: set {where[0]} or create {path} (grader exam init-secret)")
        secret = path.read_bytes().strip()
    else:
        raise ExamSecretError(f"no exam secret: set {where[0]} (or name a secret_file in course.yaml exam_settings)")
    if len(secret) < SECRET_MIN_BYTES:
        raise ExamSecretError(f"the exam secret from {' or '.join(where)} is shorter than {SECRET_MIN_BYTES} bytes")
    return secret


def new_secret() -> str:
    """A fresh random secret (64 hex digits)."""
    return os.urandom(32).hex()


class Drawer:
    """Labelled draws from one key: ``below(label, n)`` is in ``0..n-1``."""

    def __init__(self, key: bytes):
        self._key = key

    def below(self, label: str, n: int) -> int:
        if n <= 0:
            raise ValueError(f"cannot draw {label!r} from {n} values")
        digest = hmac.new(self._key, label.encode("utf-8"), hashlib.sha256).digest()
        # 64 bits modulo a small n: the bias is below 2**-50, far beyond what matters here.
        return int.from_bytes(digest[:8], "big") % n

    def permutation(self, label: str, n: int) -> list[int]:
        """A permutation of ``range(n)`` (Fisher-Yates with labelled draws)."""
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(f"{label}:{i}", i + 1)
            order[i], order[j] = order[j], order[i]
        return order


def student_key(secret: bytes, course_id: str, exam_id: str, student: str) -> bytes:
    """The per-student key every draw of the variant comes from."""
    message = b"\0".join([_DOMAIN, course_id.encode(), exam_id.encode(), student.encode()])
    return hmac.new(secret, message, hashlib.sha256).digest()


def spec_names(spec: SizeSpec) -> set[str]:
    """The names a spec's expressions use."""
    return set().union(*(names(part) for part in (spec.min, spec.max, spec.expr) if isinstance(part, str)))


def draw_order(specs: Mapping[str, SizeSpec], known: set[str]) -> list[str]:
    """The specs' names, each after the ones it uses (declared order otherwise),
    so that a YAML tool that sorts keys cannot break an exam."""
    order: list[str] = []
    pending = dict(specs)
    while pending:
        ready = next((n for n, spec in pending.items() if spec_names(spec) <= known | set(order)), None)
        if ready is None:
            raise ValueError(f"sizes that depend on each other or on unknown names: {', '.join(pending)}")
        order.append(ready)
        del pending[ready]
    return order


def draw_values(specs: Mapping[str, SizeSpec], drawer: Drawer, prefix: str,
                env: Mapping[str, Number] | None = None) -> dict[str, Number]:
    """Draw each spec, after those it depends on; later specs see earlier values (and ``env``)."""
    known: dict[str, Number] = dict(env or {})
    for name in draw_order(specs, set(known)):
        spec = specs[name]
        label = f"{prefix}:{name}"
        if spec.choices is not None:
            value = spec.choices[drawer.below(label, len(spec.choices))]
        elif spec.expr is not None:
            value = evaluate(spec.expr, known)
        else:
            low = as_int(evaluate(spec.min, known), f"{label} min")
            high = as_int(evaluate(spec.max, known), f"{label} max")
            if low > high:
                raise ValueError(f"{label}: min {low} > max {high} (with {dict(known)})")
            value = low + drawer.below(label, high - low + 1)
        known[name] = value
    return {name: known[name] for name in specs}   # declared order, for display


@dataclass(frozen=True)
class Variant:
    """One student's exam: sizes, question parameters, choice orders, seeds."""

    exam_id: str
    student: str
    sizes: dict[str, Number]
    params: dict[str, dict[str, Number]] = field(default_factory=dict)   # question id -> its parameters
    orders: dict[str, list[int]] = field(default_factory=dict)          # question id -> choice order shown
    seed: int = 0          # hidden checks' inputs (never shown to the student)
    public_seed: int = 0   # the public tests' random inputs (in variant.json)

    def env(self, question_id: str | None = None) -> dict[str, Number]:
        """The names a question's text and answer may use."""
        return {**self.sizes, **(self.params.get(question_id, {}) if question_id else {})}

    def public(self) -> dict:
        """What the student's folder gets (variant.json): no hidden seed."""
        return {"exam": self.exam_id, "student": self.student, "sizes": dict(self.sizes), "seed": self.public_seed}

    def to_dict(self) -> dict:
        return {"exam": self.exam_id, "student": self.student, "sizes": dict(self.sizes),
                "params": {q: dict(p) for q, p in self.params.items()},
                "orders": {q: list(o) for q, o in self.orders.items()},
                "seed": self.seed, "public_seed": self.public_seed}


def make_variant(course: Course, exam: Exam, student: str, secret: bytes) -> Variant:
    """The variant of ``student`` in ``exam`` (deterministic given the secret)."""
    drawer = Drawer(student_key(secret, course.course.id, exam.id, student))
    sizes = draw_values(exam.variant, drawer, "size")
    params, orders = {}, {}
    for question_id in exam.questions:
        question = course.question(question_id)
        if question.params:
            params[question_id] = draw_values(question.params, drawer, f"question:{question_id}", sizes)
        if question.kind == "choice":
            n = len(question.choices)
            orders[question_id] = drawer.permutation(f"order:{question_id}", n) if question.shuffle else list(range(n))
    return Variant(exam.id, student, sizes, params, orders,
                   seed=drawer.below("seed:hidden", 2**31), public_seed=drawer.below("seed:public", 2**31))
