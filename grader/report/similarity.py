"""Similarity across a class: the pairs of one exercise's submissions whose
code is suspiciously alike, for an instructor to look at (never a verdict).

Fingerprints are copydetect's: the code is tokenised (pygments), every name
becomes one placeholder, and k-grams of the result are winnowed, as MOSS
does. Renamed variables, reordered functions and changed comments therefore
still match. Code that every student was given, the stub and the earlier
exercises' references that part-B folders ship, is boilerplate: its
fingerprints are removed before two submissions are compared, so two
students who left the same docstrings are not alike for that.

Dead code is removed before fingerprinting (grader/report/dead_code.py):
stores nothing reads, blocks that never run, statements after a return, so
a copy padded between its own lines still matches.

A pair is judged on the larger of its two shares (how much of each one's
own code the other holds): a copy padded with dead code holds all of the
original while the original covers little of it (100 % one way, 48 % the
other), and one side held whole in the other is the strongest sign there
is. Both shares are shown. Independent correct solutions share far less
either way (tests/test_similarity.py: the accuracy corpus's ``ok_*`` files
against the references, at most 63 %).

Short submissions say little: the obvious five lines of a softmax are the
same for every careful student. A submission with fewer than
``min_fingerprints`` fingerprints of its own (after boilerplate) is listed
as too short to judge, not compared.
"""
from __future__ import annotations

import hashlib
import heapq
import io
import itertools
import logging
import operator
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from grader.report.dead_code import without_dead_code


def _import_copydetect():
    """copydetect, without the ``matplotlib.pyplot`` its module imports at
    the top for its own HTML report, which is never made here (0.2-0.5 s of
    every ``grader grade``; matplotlib itself, 0.17 s, while the class is
    graded): placeholders stand in while it is imported."""
    if "copydetect" in sys.modules or "matplotlib.pyplot" in sys.modules:
        import copydetect
        return copydetect
    placeholders = [name for name in ("matplotlib", "matplotlib.pyplot") if name not in sys.modules]
    for name in placeholders:
        sys.modules[name] = types.ModuleType(name)
    try:
        import copydetect
    finally:
        for name in placeholders:
            del sys.modules[name]  # anyone else's import gets the real one
    # copydetect hashes k-grams with the built-in hash(), salted per process
    # (PYTHONHASHSEED): which fingerprints winnowing keeps, and so which
    # submissions are "too short" and which pairs are listed, changed from
    # one `grader grade` to the next. Its module global shadows the built-in.
    copydetect.utils.hash = _stable_hash
    return copydetect


def _stable_hash(kgram: str) -> int:
    """A k-gram's 64-bit hash, the same in every process."""
    digest = hashlib.blake2b(kgram.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


_copydetect = _import_copydetect()
CodeFingerprint, compare_files = _copydetect.CodeFingerprint, _copydetect.compare_files

# copydetect's defaults (noise threshold 25, guarantee threshold 30): a shared
# run shorter than 25 filtered characters is noise, one of 30 is always seen.
NOISE_T = 25
GUARANTEE_T = 30
DEFAULT_THRESHOLD = 0.7
DEFAULT_MIN_FINGERPRINTS = 15


@dataclass(frozen=True)
class SimilarPair:
    """Two students' code for one exercise, and how much of each the other covers."""

    exercise: str
    first: str
    second: str
    first_covered: float    # share of the first's own tokens also in the second
    second_covered: float

    @property
    def similarity(self) -> float:
        """The larger share: code held whole in the other's is flagged even
        when the other pads it with code of its own (see the module's docstring)."""
        return alikeness((self.first_covered, self.second_covered))[0]


def alikeness(shares: Iterable[float]) -> tuple[float, float]:
    """How alike a pair is, for the threshold and the order of the list: its
    larger share, then its smaller (full copies before containments)."""
    ordered = sorted(shares)
    return ordered[-1], ordered[0]


@dataclass(frozen=True)
class SimilarityReport:
    exercise: str
    pairs: list[SimilarPair]      # at or above the threshold, most alike first (at most the limit asked for)
    compared: list[str]           # students whose code was compared
    too_short: list[str]          # students whose own code was too short to judge
    more: int = 0                 # pairs at or above the threshold beyond the limit, not listed


def _fingerprint(source: str, boilerplate: list[int]) -> CodeFingerprint:
    # fp= keeps copydetect off the filesystem; language= names the lexer
    # (found by file name, pygments first scans every lexer: 0.1 s a run).
    # Dead code goes first (grader/report/dead_code.py): lines that never run,
    # put between a copy's statements, would break every k-gram they cross.
    return CodeFingerprint("submission.py", NOISE_T, GUARANTEE_T - NOISE_T + 1, boilerplate=boilerplate,
                           language="python", fp=io.StringIO(without_dead_code(source)))


def boilerplate_hashes(sources: Iterable[str]) -> list[int]:
    """The fingerprints of code every student was given."""
    hashes: set[int] = set()
    for source in sources:
        hashes |= set(_fingerprint(source, []).hashes)
    return sorted(hashes)


def similar_pairs(exercise: str, sources: Mapping[str, str], boilerplate: Iterable[str] = (),
                  threshold: float = DEFAULT_THRESHOLD,
                  min_fingerprints: int = DEFAULT_MIN_FINGERPRINTS, limit: int | None = None) -> SimilarityReport:
    """Compare every pair of ``sources`` (student -> module text) of one exercise.

    Each distinct text is fingerprinted once and each pair of distinct texts
    compared once (students who hand in the same bytes share the result):
    the untouched stubs and copied files of a class cost nothing extra.
    ``limit``: list only that many pairs, the most alike first, and count
    the rest in ``more`` (30 students with one file are 435 pairs; a class
    of near-copies, tens of thousands: the class report lists the first)."""
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # copydetect warns on empty files
    given = boilerplate_hashes(boilerplate)
    by_text: dict[str, list[str]] = {}
    for student in sorted(sources):
        by_text.setdefault(sources[student], []).append(student)
    prints, too_short = {}, []
    for text, students in by_text.items():
        fingerprint = _fingerprint(text, given)
        if len(fingerprint.hashes) < min_fingerprints:
            too_short += students
        else:
            prints[text] = fingerprint
    alike = _alike_texts(prints, threshold)
    listed, total = _student_pairs(exercise, alike, by_text, sources, limit)
    compared = sorted(student for text in prints for student in by_text[text])
    return SimilarityReport(exercise, listed, compared, sorted(too_short), more=total - len(listed))


def _alike_texts(prints: dict[str, CodeFingerprint], threshold: float) -> list[tuple[str, str, dict[str, float]]]:
    """Each pair of distinct texts (a text with itself too) at or above the
    threshold: (first, second, each one's share covered by the other)."""
    alike = []
    texts = list(prints)
    for i, first_text in enumerate(texts):
        for second_text in texts[i:]:
            _, (first_covered, second_covered), _ = compare_files(prints[first_text], prints[second_text])
            covered = {first_text: float(first_covered), second_text: float(second_covered)}
            if alikeness(covered.values())[0] >= threshold:
                alike.append((first_text, second_text, covered))
    return alike


_BY_NAMES = operator.itemgetter(0, 1)  # a (first, second, covered) pair, ordered by its students' names


def _student_pairs(exercise: str, alike: list[tuple[str, str, dict[str, float]]], by_text: dict[str, list[str]],
                   sources: Mapping[str, str], limit: int | None) -> tuple[list[SimilarPair], int]:
    """The students' pairs of ``alike`` texts, most alike first, at most
    ``limit`` of them, and how many there are in all (counted, not listed).
    A pair's alikeness is its texts' (:func:`alikeness`), so the pairs are
    made one alikeness at a time, from the highest, until the limit is met."""
    def count(first_text: str, second_text: str) -> int:
        n, m = len(by_text[first_text]), len(by_text[second_text])
        return n * (n - 1) // 2 if first_text == second_text else n * m

    total = sum(count(a, b) for a, b, _ in alike)
    listed: list[SimilarPair] = []
    def level_of(t: tuple[str, str, dict[str, float]]) -> tuple[float, float]:
        return alikeness(t[2].values())

    for _, level in itertools.groupby(sorted(alike, key=level_of, reverse=True), key=level_of):
        if limit is not None and len(listed) >= limit:
            break
        names = []  # (first, second, covered): a level of near-copies holds thousands; only the first are made
        for first_text, second_text, covered in level:
            group = by_text[first_text]
            others = itertools.combinations(group, 2) if first_text == second_text else \
                itertools.product(group, by_text[second_text])
            names += [(*sorted((a, b)), covered) for a, b in others]
        chosen = sorted(names, key=_BY_NAMES) if limit is None else \
            heapq.nsmallest(limit - len(listed), names, key=_BY_NAMES)
        listed += [SimilarPair(exercise, first, second, covered[sources[first]], covered[sources[second]])
                   for first, second, covered in chosen]
    return listed, total
