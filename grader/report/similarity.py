"""Similarity across a class: the pairs of one exercise's submissions whose
code is suspiciously alike, for an instructor to look at (never a verdict).

Fingerprints are copydetect's: the code is tokenised (pygments), every name
becomes one placeholder, and k-grams of the result are winnowed, as MOSS
does. Renamed variables, reordered functions and changed comments therefore
still match. Code that every student was given, the stub and the earlier
exercises' references that part-B folders ship, is boilerplate: its
fingerprints are removed before two submissions are compared, so two
students who left the same docstrings are not alike for that.

Short submissions say little: the obvious five lines of a softmax are the
same for every careful student. A submission with fewer than
``min_fingerprints`` fingerprints of its own (after boilerplate) is listed
as too short to judge, not compared.
"""
from __future__ import annotations

import io
import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from copydetect import CodeFingerprint, compare_files

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
        """The smaller share: a long submission that contains a short one
        whole is not, by that alone, a copy of it."""
        return min(self.first_covered, self.second_covered)


@dataclass(frozen=True)
class SimilarityReport:
    exercise: str
    pairs: list[SimilarPair]      # at or above the threshold, most alike first
    compared: list[str]           # students whose code was compared
    too_short: list[str]          # students whose own code was too short to judge


def _fingerprint(source: str, boilerplate: list[int]) -> CodeFingerprint:
    # fp= keeps copydetect off the filesystem; the name only picks the lexer.
    return CodeFingerprint("submission.py", NOISE_T, GUARANTEE_T - NOISE_T + 1, boilerplate=boilerplate,
                           fp=io.StringIO(source))


def boilerplate_hashes(sources: Iterable[str]) -> list[int]:
    """The fingerprints of code every student was given."""
    hashes: set[int] = set()
    for source in sources:
        hashes |= set(_fingerprint(source, []).hashes)
    return sorted(hashes)


def similar_pairs(exercise: str, sources: Mapping[str, str], boilerplate: Iterable[str] = (),
                  threshold: float = DEFAULT_THRESHOLD,
                  min_fingerprints: int = DEFAULT_MIN_FINGERPRINTS) -> SimilarityReport:
    """Compare every pair of ``sources`` (student -> module text) of one exercise."""
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # copydetect warns on empty files
    given = boilerplate_hashes(boilerplate)
    prints, too_short = {}, []
    for student in sorted(sources):
        fingerprint = _fingerprint(sources[student], given)
        if len(fingerprint.hashes) < min_fingerprints:
            too_short.append(student)
        else:
            prints[student] = fingerprint
    pairs = []
    for first, second in itertools.combinations(sorted(prints), 2):
        _, (first_covered, second_covered), _ = compare_files(prints[first], prints[second])
        pair = SimilarPair(exercise, first, second, float(first_covered), float(second_covered))
        if pair.similarity >= threshold:
            pairs.append(pair)
    pairs.sort(key=lambda p: (-p.similarity, p.first, p.second))
    return SimilarityReport(exercise, pairs, sorted(prints), too_short)
