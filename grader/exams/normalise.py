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
