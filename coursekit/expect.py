"""Assertions for public tests that explain themselves.

Each failed expectation raises :class:`ProbeFailure`, which says what was
expected and what happened, and names the pitfalls whose hints the pytest
plugin should show::

    expect.close(out, torch.softmax(x, -1), what="softmax of a 2-D input",
                 pitfalls=["softmax-dim0"])
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType

import torch

from coursekit.compare import Mismatch, compare_tensors
from coursekit.course import CourseInfo, exercise_id_of
from coursekit.probes.source import forbidden_uses


class ProbeFailure(AssertionError):
    """A failed expectation: ``what`` was checked, ``expected`` vs ``actual``,
    and the pitfall ids that typically cause it. ``diagnosed``: those of
    them that a diagnosis reproduced (the known mistake gives exactly these
    results); the others are guesses, shown as "possibly"."""

    def __init__(self, what: str, expected: str, actual: str, pitfalls: Iterable[str] = (),
                 diagnosed: Iterable[str] = ()):
        self.what = what
        self.expected = expected
        self.actual = actual
        self.diagnosed = list(diagnosed)
        self.pitfalls = list(dict.fromkeys([*pitfalls, *self.diagnosed]))
        super().__init__(f"{what}\n  expected: {expected}\n  got:      {actual}")


class Guesses(list):
    """What a diagnosis returns when it reproduced no known mistake: the
    usual suspects, shown as "possibly" (a new mistake fails the same test)."""


def describe(mismatch: Mismatch) -> tuple[str, str]:
    """(expected, actual) phrases for a mismatch, values included."""
    if mismatch.kind == "shape":
        return f"shape {mismatch.expected}", f"shape {mismatch.actual}"
    if mismatch.kind == "dtype":
        return f"dtype {mismatch.expected}", f"dtype {mismatch.actual}"
    if mismatch.kind == "type":
        return mismatch.expected, f"a {mismatch.actual}"
    if mismatch.kind == "nan":
        return mismatch.expected, f"{mismatch.actual}, first at index {mismatch.index}"
    n_bad, n_total = mismatch.details["n_bad"], mismatch.details["n_total"]
    return (
        f"{mismatch.expected} at index {mismatch.index}",
        f"{mismatch.actual} ({n_bad} of {n_total} values differ, "
        f"largest difference {mismatch.max_abs_diff:.3g})",
    )


def close(
    actual: object,
    expected: torch.Tensor,
    *,
    what: str,
    pitfalls: Iterable[str] = (),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    check_dtype: bool = True,
    diagnose: Callable[[], Iterable[str]] | None = None,
) -> None:
    """``actual`` equals ``expected`` within tolerance, same shape and dtype.

    ``diagnose``, if given, runs only on failure and returns the pitfall
    ids whose known mistake reproduces ``actual`` (shown for sure, instead
    of ``pitfalls``), or :class:`Guesses` when none does (shown as
    "possibly"): useful when working them out costs extra calls."""
    __tracebackhide__ = True
    mismatch = compare_tensors(actual, expected, atol=atol, rtol=rtol, check_dtype=check_dtype)
    if mismatch is not None:
        exp, act = describe(mismatch)
        found = diagnose() if diagnose else []
        guessed = isinstance(found, Guesses)
        found = list(found)  # a diagnosis may be a generator
        raise ProbeFailure(what, exp, act, [*pitfalls, *found], () if guessed else found)


def shape(actual: object, expected: tuple[int, ...], *, what: str, pitfalls: Iterable[str] = ()) -> None:
    """``actual`` is a tensor of exactly this shape."""
    __tracebackhide__ = True
    if type(actual) is not torch.Tensor:
        raise ProbeFailure(what, f"a torch.Tensor of shape {tuple(expected)}", f"a {type(actual).__name__}", pitfalls)
    if tuple(actual.shape) != tuple(expected):
        raise ProbeFailure(what, f"shape {tuple(expected)}", f"shape {tuple(actual.shape)}", pitfalls)


def that(condition: bool, *, what: str, expected: str, actual: str, pitfalls: Iterable[str] = ()) -> None:
    """A property holds; ``expected``/``actual`` describe it in words."""
    __tracebackhide__ = True
    if not condition:
        raise ProbeFailure(what, expected, actual, pitfalls)


def equal(actual: object, expected: object, *, what: str, pitfalls: Iterable[str] = ()) -> None:
    """Plain values (names, shapes, counts) are equal."""
    __tracebackhide__ = True
    if actual != expected:
        raise ProbeFailure(what, repr(expected), repr(actual), pitfalls)


def modules_registered(hidden_lists: list[str], *, what: str = "sub-modules of your module") -> None:
    """No sub-module hides in a plain Python list (see
    :func:`coursekit.probes.modules.hidden_list_modules`)."""
    __tracebackhide__ = True
    that(
        not hidden_lists, what=what,
        expected="every layer registered (as an attribute or in an nn.ModuleList)",
        actual="layers kept in a plain list: " + ", ".join(hidden_lists),
        pitfalls=["plain-list-layers"],
    )


def gradients_reach_all(reach: dict[str, bool], *, what: str = "gradients after backward()", pitfalls: Iterable[str] = ()) -> None:
    """Every parameter received a non-zero gradient
    (see :func:`coursekit.probes.modules.gradient_reach`)."""
    __tracebackhide__ = True
    missing = sorted(name for name, got in reach.items() if not got)
    that(not missing, what=what, expected="a non-zero gradient for every parameter",
         actual="no gradient for " + ", ".join(missing), pitfalls=pitfalls)


@contextlib.contextmanager
def no_error(*, what: str, pitfalls: Iterable[str], match: str) -> Iterator[None]:
    """Turn an error whose text matches ``match`` into a :class:`ProbeFailure`
    naming ``pitfalls`` (e.g. a shape error on batched input that is the
    classic ``.T`` mistake). Other errors, and a stub's NotImplementedError,
    pass through unchanged."""
    try:
        yield
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised unless it matches
        if not re.search(match, f"{type(exc).__name__}: {exc}"):
            raise
        raise ProbeFailure(what, "no error", f"{type(exc).__name__}: {exc}", pitfalls) from exc


def no_forbidden_calls(module: ModuleType, *, advice: str) -> None:
    """The module uses none of the names its exercise's ``forbidden`` list
    in course.yaml names (attribute accesses and from-imports)."""
    __tracebackhide__ = True
    exercise = getattr(module, "__course_exercise__", None)  # set by the notebook runner
    if exercise is None:
        folder = Path(module.__file__).resolve().parent
        exercise = CourseInfo.near(folder).exercise(exercise_id_of(folder) or "") or {}
    uses = forbidden_uses(module, list(exercise.get("forbidden", [])))
    that(not uses, what=f"uses of {', '.join(exercise.get('forbidden', []))} in {Path(module.__file__).name}",
         expected=f"none: {advice}", actual=", ".join(f"{u['name']} on line {u['line']}" for u in uses))


def layer_stack(info: dict, *, owner: str, layer_class: str, n: int) -> None:
    """A stack keeps ``n`` separate ``layer_class`` objects in an
    nn.ModuleList named ``layers`` (``info``: a structure probe's result with
    ``hidden_lists`` and ``layers``)."""
    __tracebackhide__ = True
    modules_registered(info["hidden_lists"], what=f"the layers of {owner}")
    layers = info["layers"] or {"type": "(no attribute `layers`)"}
    equal(layers.get("type"), "ModuleList", what=f"type of {owner}.layers",
          pitfalls=["plain-list-layers"] if layers.get("type") in ("list", "tuple") else [])
    equal((layers["length"], layers["classes"]), (n, [layer_class]), what=f"(len, classes) of {owner}.layers")
    that(layers["distinct"] == n, what=f"the {n} layers of {owner}",
         expected=f"{n} separate {layer_class} objects, each with its own weights",
         actual=f"only {layers['distinct']} distinct object(s): `[layer] * n` repeats one layer",
         pitfalls=["repeated-layer"])
