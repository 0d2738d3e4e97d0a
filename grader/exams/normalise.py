"""Bring a short exam answer to one canonical spelling before comparing it
with the accepted answers, so that differences that carry no meaning do not
cost a student the points.

What does not matter: letter case; Unicode compatibility forms (full-width
letters and digits, NFKC); the Unicode minus and dashes (``−inf`` is
``-inf``); curly or straight, single or double quotes; whitespace; sentence
punctuation and brackets around the whole answer; the English articles
(``the``, ``a``, ``an``) and possessive ``'s``; the Chinese particle ``的``;
English plurals (``values``, ``value vectors``, ``queries``).

Both the student's answer and every accepted answer go through the same
function, so an accept list needs only one spelling of each idea.
"""
from __future__ import annotations

import re
import unicodedata

# Minus-like characters that NFKC leaves alone: students paste them from
# slides, papers and Chinese input methods.
_MINUS = dict.fromkeys(map(ord, "\u2212\u2010\u2011\u2012\u2013\u2014\u2015\ufe63\uff0d"), "-")
_QUOTES = dict.fromkeys(map(ord, "\"`\u2018\u2019\u201c\u201d\u2032\u2033"), "'")
_EDGE_PUNCTUATION = " \t\r\n.,;:!?。，；：！？、'"
_BRACKETS = {"(": ")", "[": "]", "{": "}", "（": "）", "【": "】", "「": "」", "『": "』", "《": "》"}
_ARTICLES = re.compile(r"\b(?:the|a|an)\b", re.ASCII)
_POSSESSIVE = re.compile(r"(?<=[a-z])'s\b", re.ASCII)
_WORD = re.compile(r"[a-z]+", re.ASCII)


def _singular(word: str) -> str:
    """English plural to singular, for the nouns of the course (values,
    keys, queries, vectors, outputs, matrices, ...); short words stay."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ices") and len(word) > 5:
        return word[:-4] + "ix"        # matrices -> matrix
    if word.endswith("ies"):
        return word[:-3] + "y"         # queries -> query
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def _strip_edges(text: str) -> str:
    """Punctuation and matching brackets around the whole answer, repeatedly."""
    while True:
        stripped = text.strip(_EDGE_PUNCTUATION)
        if len(stripped) >= 2 and _BRACKETS.get(stripped[0]) == stripped[-1]:
            stripped = stripped[1:-1]
        if stripped == text:
            return text
        text = stripped


def normalise_short(value: object) -> str:
    """The canonical spelling of a short answer (see the module's docstring).

    >>> normalise_short("The Value Vectors.") == normalise_short("value vector")
    True
    >>> normalise_short("−∞") == normalise_short("-∞")
    True
    """
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    text = text.translate(_MINUS).translate(_QUOTES)
    text = _strip_edges(text.strip())
    text = _POSSESSIVE.sub("", text)
    text = _ARTICLES.sub(" ", text)
    text = text.replace("的", "")
    text = _WORD.sub(lambda m: _singular(m.group(0)), text)
    return _strip_edges(re.sub(r"\s+", "", text))


# ------------------------------------------------------------------ numbers
# A single-number answer as students write it: "8,000", "8 000", "12,288
# bytes", "768 B", "35.99%", "≈0.3599". Only for keys that are ONE number:
# there "8,000" is eight thousand, never the list [8, 0] (a shape's key
# reads lists, answers.parse_numbers).

# Units a question may name in its text (any of the first words, in either
# language), and the spellings a student may put after the number then.
UNITS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("byte", "字节"), ("bytes", "byte", "b", "字节", "个字节")),
    (("parameter", "参数"), ("parameters", "parameter", "params", "param", "个参数", "参数", "个")),
)
# A question about a probability (or an attention weight, which is one)
# reads "35.99%" as 0.3599.
_PROBABILITY = re.compile(r"\bprobabilit(?:y|ies)\b|\bweights?\b(?!_)|概率|权重", re.I)
_APPROX = re.compile(r"^(?:≈|~|∼|≃|约|大约|about|approximately|approx\.?)\s*", re.I)
# Thousands in groups of three, one separator throughout (NFKC has made thin
# and no-break spaces ordinary ones): 8,000  8 000  8_000  12,288.5
_GROUPED = re.compile(r"[-+]?\d{1,3}(?P<sep>[, _])\d{3}(?:(?P=sep)\d{3})*(?:\.\d+)?")


def units_named(question_text: str) -> tuple[str, ...]:
    """The unit spellings a question allows after the number: those of every
    unit its text names (a question about bytes takes "bytes", "B", "字节")."""
    text = question_text.casefold()
    return tuple(spelling for names, spellings in UNITS if any(name in text for name in names)
                 for spelling in spellings)


def allows_percent(question_text: str) -> bool:
    """Whether the question asks for a probability (or a weight), which a
    student may give in percent."""
    return bool(_PROBABILITY.search(question_text))


def single_number_text(value: str, *, units: tuple[str, ...] = (), percent: bool = False) -> tuple[str, float] | None:
    """``(expression, factor)``: the answer's arithmetic, ready for
    grader/exams/expr.py, and what to multiply its value by (0.01 for a
    percent); None when it is not one number in a form we read.

    >>> single_number_text("≈ 12,288 bytes", units=("bytes",))
    ('12288', 1.0)
    >>> single_number_text("35.99%", percent=True)
    ('35.99', 0.01)
    >>> single_number_text("8, 000") is None
    True
    """
    text = unicodedata.normalize("NFKC", value).translate(_MINUS).strip().rstrip("。.").strip()
    text = _APPROX.sub("", text)
    factor = 1.0
    if text.endswith("%"):
        if not percent:
            return None
        text, factor = text[:-1].rstrip(), 0.01
    else:
        lowered = text.casefold()
        for unit in sorted(units, key=len, reverse=True):
            if lowered.endswith(unit) and len(text) > len(unit):
                rest = text[:-len(unit)]
                # "768B" and "768 B" yes; the b of "0xb" or of a word no.
                if unit.isascii() and rest[-1:].isalpha():
                    continue
                text = rest.rstrip()
                break
    if _GROUPED.fullmatch(text):
        text = re.sub(r"[, _]", "", text)
    elif "," in text or re.search(r"\d\s+\d", text):
        return None                      # "8, 000", "1,00", "2 3": not one number we can be sure of
    return (text, factor) if text else None
