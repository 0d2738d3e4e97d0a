"""Hidden inputs drawn per submission, from the course's grading secret.

A check's hidden inputs come from a generator seeded with
``HMAC-SHA256(secret, exercise id, sha256 of the submitted module)``
(mixed with the check's id, :meth:`grader.checks.Check.build_calls`):

* the same submission always gets the same inputs, so a regrade gives the
  same grade, and an unchanged resubmission learns nothing new;
* a changed submission (one byte, a comment) gets inputs nobody has seen:
  whatever a feedback page let slip about the last ones is worth nothing;
* without the secret nobody can compute them, not even from the source.

The student's id is not part of the seed, on purpose: two students who hand
in the same bytes get the same inputs and so the same grade (a verdict is
about the code, never about who it is), and the reference's results for a
class's many untouched stubs are computed once. It would add no secrecy:
inputs drawn for some bytes only ever grade those bytes, whoever hands them in.

The secret is ``$GRADER_GRADING_SECRET``, else the file ``.grading-secret``
beside course.yaml (created on first use, mode 600, listed in .gitignore;
inside the repository root, so the sandbox hides it from the child as it
hides solutions/). It is never in anything a student gets.

In:  the grading secret, an exercise id, the submitted module's bytes.
Out: the seed of that submission's hidden inputs (None: fixed inputs).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import sys
from dataclasses import dataclass
from pathlib import Path

SECRET_ENV = "GRADER_GRADING_SECRET"
SECRET_FILE = ".grading-secret"
SECRET_MIN_BYTES = 16
_DOMAIN = b"attention-course/hidden-inputs/v1"


class GradingSecretError(ValueError):
    """No usable grading secret; the message says where one is looked for."""


def secret_path(root: Path) -> Path:
    return root / SECRET_FILE


def load_grading_secret(root: Path, *, create: bool = True) -> bytes:
    """The grading secret: ``$GRADER_GRADING_SECRET``, else ``root/.grading-secret``,
    created there on first use (with a line on stderr saying so)."""
    value = os.environ.get(SECRET_ENV, "").strip()
    if value:
        secret, where = value.encode("utf-8"), f"${SECRET_ENV}"
    else:
        path = secret_path(root)
        where = str(path)
        if not path.is_file():
            if not create:
                raise GradingSecretError(f"no grading secret: set ${SECRET_ENV} or create {path}")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass   # another grader made it meanwhile: read theirs
            except OSError as exc:
                raise GradingSecretError(f"cannot create the grading secret {path}: {exc.strerror}") from exc
            else:
                with os.fdopen(fd, "w") as fh:
                    fh.write(os.urandom(32).hex() + "\n")
                print(f"grader: created the grading secret {path} (hidden inputs are drawn from it; keep it, "
                      "never commit it or give it to students)", file=sys.stderr)
        secret = path.read_bytes().strip()
    if len(secret) < SECRET_MIN_BYTES:
        raise GradingSecretError(f"the grading secret from {where} is shorter than {SECRET_MIN_BYTES} bytes")
    return secret


@dataclass(frozen=True)
class HiddenInputs:
    """Draws each submission's input seed from the grading secret."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < SECRET_MIN_BYTES:
            raise ValueError(f"a grading secret needs at least {SECRET_MIN_BYTES} bytes")

    def __repr__(self) -> str:  # never the secret in a traceback or a log
        return "HiddenInputs(<secret>)"

    def seed(self, exercise_id: str, source: bytes | None) -> int | None:
        """The seed of the hidden inputs for this module's bytes (None when
        nothing was handed in: no call runs)."""
        if source is None:
            return None
        content = hashlib.sha256(source).hexdigest().encode()
        digest = hmac.new(self.secret, b"\0".join([_DOMAIN, exercise_id.encode(), content]), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") >> 2   # 62 bits: a torch seed


def check_seed(seed: int, check_id: str, check_seed: int) -> int:
    """One check's generator seed, from the submission's: two checks of one
    submission draw different inputs (their own seeds may be equal)."""
    digest = hashlib.sha256(f"{seed}\0{check_id}\0{check_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2
